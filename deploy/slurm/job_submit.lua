-- job_submit.lua: rightsize advice and enforcement at submission (SLURM job_submit/lua plugin).
--
-- Install: copy to /etc/slurm/job_submit.lua, set `JobSubmitPlugins=lua` in slurm.conf and run
-- `scontrol reconfigure`. Settings: the defaults below, overridden by /etc/slurm/rightsize.conf
-- (docs/slurm.md lists every key). It runs inside slurmctld (Lua 5.1), under slurmctld's job
-- write lock, so every call is bounded:
--
--   * For each job it asks rightsize for a prediction: the server's POST /api/v1/predict through
--     `curl --max-time` (transport = http), or `rightsize predict --json` under `timeout`
--     (transport = cli). Either way the answer must come within budget_ms (default 200 ms).
--   * It FAILS OPEN: a dead, slow or erroring rightsize, an answer it cannot read, a bug in this
--     file: the job goes through unchanged (one line in slurmctld.log says why). It never
--     rejects a job.
--   * Mode per partition or account (account wins): off, advise (tell the user the predicted need
--     and the request to make, through sbatch's stderr, and keep a compact prediction in the
--     job's admin comment), enforce (advise, and lower memory, CPU and time requests that are
--     well over the suggestion, within floors and the largest cut allowed; never raises a
--     request, and says every change it makes).
--   * Users opt out with `--comment=rightsize:off` (no prediction at all) or
--     `--comment=rightsize:advise` (advice, no change), in #SBATCH lines or on the command line.
--
-- The admin comment it writes ("rightsize:v1 mode=… mem_mb=p50,suggested,requested …") is read
-- back by `rightsize ingest slurm`, which stores it as the job's submit-time prediction and uses
-- its out= path to diagnose the job if it fails.

local M = {}

-- Defaults. /etc/slurm/rightsize.conf (`key = value` lines, # comments) overrides any of them.
M.config = {
  transport = "http",                    -- http | cli
  server = "http://127.0.0.1:8080",      -- rightsize serve
  -- http_client: auto = LuaSocket (no child process: about 1 ms) when it is installed and the
  -- server is an IP address (a name lookup could not be bounded), else curl (a child process
  -- of slurmctld: 10-20 ms); or socket, or curl.
  http_client = "auto",
  auth_header_file = "",                 -- a file with one line: "Authorization: Bearer TOKEN"
  curl = "/usr/bin/curl",
  cli = "/usr/local/bin/rightsize",      -- transport = cli: `rightsize predict` on a store
  cli_db = "",                           --   its --db ("" = its default)
  timeout = "/usr/bin/timeout",
  budget_ms = 200,                       -- the most one prediction may add to a submission
  cluster = "",                          -- the cluster's name in the store ("" = the store's only)
  risk = 0.01,                           -- accepted chance that a suggestion is too small
  mode = "advise",                       -- off | advise | enforce, unless named below
  -- mode.partition.NAME = MODE, mode.account.NAME = MODE (in rightsize.conf)
  floor_mem_mb = 256,                    -- enforce never lowers memory below this
  floor_cpus = 1,                        -- nor CPUs below this
  floor_time_min = 10,                   -- nor the time limit below this (minutes)
  max_cut = 0.75,                        -- nor any request by more than this share of it
  min_cut = 0.2,                         -- and only changes a request it can cut by this share
  tmpdir = "/tmp",
  config_file = "/etc/slurm/rightsize.conf",
}
M.modes = {partition = {}, account = {}}
local DEFAULTS = {}
for k, v in pairs(M.config) do DEFAULTS[k] = v end

local NO_VAL = 4294967294        -- SLURM's "not set" for 32-bit fields
local NO_VAL16 = 65534
local INFINITE = 4294967295

local function log_info(fmt, ...)
  if slurm and slurm.log_info then slurm.log_info("rightsize: " .. fmt, ...) end
end

local function log_user(fmt, ...)
  if slurm and slurm.log_user then slurm.log_user("rightsize: " .. fmt, ...) end
end

-- A number SLURM actually set: nil for unset (nil, NO_VAL, NO_VAL64, INFINITE) and, for 16-bit
-- fields, NO_VAL16.
local function set_number(v, bits16)
  v = tonumber(v)
  if v == nil or v == NO_VAL or v == INFINITE or v >= 1.8e19 then return nil end
  if bits16 and v >= NO_VAL16 then return nil end
  return v
end

---------------------------------------------------------------------------------------------
-- Configuration
---------------------------------------------------------------------------------------------

local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

-- Reads `key = value` lines; unknown keys are logged and ignored.
function M.load_config(path)
  local f = io.open(path, "r")
  if not f then return false end
  for line in f:lines() do
    line = trim(line:gsub("#.*$", ""))
    local key, value = line:match("^([%w_%.%-]+)%s*=%s*(.-)$")
    if key then
      local kind, name = key:match("^mode%.(%a+)%.(.+)$")
      if kind and M.modes[kind] then
        M.modes[kind][name] = value
      elseif M.config[key] ~= nil then
        if type(M.config[key]) == "number" then
          M.config[key] = tonumber(value) or M.config[key]
        else
          M.config[key] = value
        end
      else
        log_info("%s: unknown key %s ignored", path, key)
      end
    elseif line ~= "" then
      log_info("%s: cannot read line '%s'", path, line)
    end
  end
  f:close()
  return true
end

-- The defaults, then the file: called for every job, so that an edit of the file takes effect
-- at the next submission (reading a few lines costs microseconds).
function M.reload_config(path)
  for k, v in pairs(DEFAULTS) do M.config[k] = v end
  M.modes = {partition = {}, account = {}}
  return M.load_config(path)
end

-- The mode of a job: the user's opt-out first, then its account's, its partition's, the default.
function M.mode_for(job)
  local comment = job.comment or ""
  if comment:find("rightsize:off", 1, true) then return "off", "opted out (--comment)" end
  local mode = M.modes.account[job.account or ""] or M.modes.partition[job.partition or ""]
      or M.config.mode
  if mode == "enforce" and comment:find("rightsize:advise", 1, true) then
    return "advise", "enforcement opted out (--comment)"
  end
  if mode ~= "off" and mode ~= "advise" and mode ~= "enforce" then
    log_info("unknown mode '%s': advise", tostring(mode))
    mode = "advise"
  end
  return mode, nil
end

---------------------------------------------------------------------------------------------
-- JSON: the request is a flat object; the answer is decoded by a small reader (slurmctld's
-- Lua has no JSON module we can count on; lua-cjson is used when installed).
---------------------------------------------------------------------------------------------

local escapes = {['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f',
                 ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t'}

local function json_string(s)
  return '"' .. tostring(s):gsub('[%c"\\]', function(c)
    return escapes[c] or string.format("\\u%04x", c:byte())
  end) .. '"'
end

function M.encode(obj)
  if type(obj) == "table" then
    if obj[1] ~= nil or next(obj) == nil and obj.__array then
      local parts = {}
      for _, v in ipairs(obj) do parts[#parts + 1] = M.encode(v) end
      return "[" .. table.concat(parts, ",") .. "]"
    end
    local parts, keys = {}, {}
    for k in pairs(obj) do if k ~= "__array" then keys[#keys + 1] = k end end
    table.sort(keys)
    for _, k in ipairs(keys) do parts[#parts + 1] = json_string(k) .. ":" .. M.encode(obj[k]) end
    return "{" .. table.concat(parts, ",") .. "}"
  elseif type(obj) == "number" then
    return string.format("%.17g", obj)
  elseif type(obj) == "boolean" then
    return tostring(obj)
  elseif obj == nil then
    return "null"
  end
  return json_string(obj)
end

local function decode_error(s, i, what) error(string.format("json: %s at byte %d", what, i), 0) end

local decode_value

local function skip(s, i) return s:find("[^ \t\r\n]", i) or #s + 1 end

local function decode_string(s, i)  -- s:sub(i, i) == '"'
  local out, j = {}, i + 1
  while true do
    local c = s:sub(j, j)
    if c == "" then decode_error(s, j, "unterminated string") end
    if c == '"' then return table.concat(out), j + 1 end
    if c == "\\" then
      local e = s:sub(j + 1, j + 1)
      local simple = {b = "\b", f = "\f", n = "\n", r = "\r", t = "\t"}
      if e == "u" then
        local code = tonumber(s:sub(j + 2, j + 5), 16) or decode_error(s, j, "bad \\u")
        out[#out + 1] = code < 128 and string.char(code) or "?"
        j = j + 6
      else
        out[#out + 1] = simple[e] or e
        j = j + 2
      end
    else
      local k = s:find('["\\]', j) or #s + 1
      out[#out + 1] = s:sub(j, k - 1)
      j = k
    end
  end
end

decode_value = function(s, i)
  i = skip(s, i)
  local c = s:sub(i, i)
  if c == "{" then
    local obj = {}
    i = skip(s, i + 1)
    if s:sub(i, i) == "}" then return obj, i + 1 end
    while true do
      if s:sub(i, i) ~= '"' then decode_error(s, i, "expected a key") end
      local key
      key, i = decode_string(s, i)
      i = skip(s, i)
      if s:sub(i, i) ~= ":" then decode_error(s, i, "expected ':'") end
      obj[key], i = decode_value(s, i + 1)
      i = skip(s, i)
      c = s:sub(i, i)
      if c == "}" then return obj, i + 1 end
      if c ~= "," then decode_error(s, i, "expected ',' or '}'") end
      i = skip(s, i + 1)
    end
  elseif c == "[" then
    local arr = {}
    i = skip(s, i + 1)
    if s:sub(i, i) == "]" then return arr, i + 1 end
    while true do
      arr[#arr + 1], i = decode_value(s, i)
      i = skip(s, i)
      c = s:sub(i, i)
      if c == "]" then return arr, i + 1 end
      if c ~= "," then decode_error(s, i, "expected ',' or ']'") end
      i = i + 1
    end
  elseif c == '"' then
    return decode_string(s, i)
  elseif s:sub(i, i + 3) == "true" then
    return true, i + 4
  elseif s:sub(i, i + 4) == "false" then
    return false, i + 5
  elseif s:sub(i, i + 3) == "null" then
    return nil, i + 4
  end
  local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", i)
  if not num or num == "" then decode_error(s, i, "unexpected character") end
  return tonumber(num), i + #num
end

function M.decode(s)
  local ok, cjson = pcall(require, "cjson")
  if ok and cjson then
    local ok2, v = pcall(cjson.decode, s)
    if ok2 then return v end
  end
  local v = decode_value(s, 1)
  return v
end

---------------------------------------------------------------------------------------------
-- The request: the script as submitted plus, as sbatch arguments, what job_desc says now
-- (command-line options are not in the script; job_desc holds the effective values).
---------------------------------------------------------------------------------------------

-- Reads the job description into a plain table (job_desc is userdata-backed; read each field
-- once).
function M.read_job(job_desc, submit_uid)
  local job = {}
  for _, k in ipairs({"script", "name", "partition", "account", "user_name", "comment",
                      "admin_comment", "std_out", "work_dir", "array_inx", "tres_per_node",
                      "gres"}) do
    local ok, v = pcall(function() return job_desc[k] end)
    if ok and v ~= nil then job[k] = tostring(v) end
  end
  for _, k in ipairs({"min_mem_per_node", "min_mem_per_cpu", "min_cpus", "time_limit",
                      "num_tasks", "cpus_per_task", "min_nodes"}) do
    local ok, v = pcall(function() return job_desc[k] end)
    if ok then job[k] = set_number(v, k == "cpus_per_task") end
  end
  job.user_name = job.user_name or tostring(submit_uid or "")
  return job
end

-- GPUs per node from tres_per_node ("gres:gpu:2", "gres/gpu:a100=2", "gpu:2").
function M.gpus_per_node(job)
  local t = job.tres_per_node or job.gres
  if not t then return nil end
  local n = t:match("gpu[^,]-[:=](%d+)$") or t:match("gpu[^,]-[:=](%d+),")
  if n then return tonumber(n) end
  if t:find("gpu") then return 1 end
  return nil
end

-- The job's memory in MB for the whole job (per node × nodes, or per CPU × CPUs).
function M.memory_mb(job)
  local nodes = job.min_nodes or 1
  if job.min_mem_per_node and job.min_mem_per_node > 0 then
    return job.min_mem_per_node * nodes, "node"
  end
  if job.min_mem_per_cpu and job.min_mem_per_cpu > 0 then
    return job.min_mem_per_cpu * (job.min_cpus or 1), "cpu"
  end
  return nil, nil
end

function M.build_request(job)
  local args = {}
  local function add(s) args[#args + 1] = s end
  if job.min_mem_per_node and job.min_mem_per_node > 0 then
    add("--mem=" .. job.min_mem_per_node .. "M")
  elseif job.min_mem_per_cpu then
    add("--mem-per-cpu=" .. job.min_mem_per_cpu .. "M")
  end
  if job.num_tasks then add("--ntasks=" .. job.num_tasks) end
  if job.cpus_per_task then add("--cpus-per-task=" .. job.cpus_per_task) end
  if not job.num_tasks and not job.cpus_per_task and job.min_cpus and job.min_cpus > 1 then
    add("--cpus-per-task=" .. job.min_cpus)
  end
  if job.min_nodes and job.min_nodes > 1 then add("--nodes=" .. job.min_nodes) end
  if job.time_limit then add("--time=" .. job.time_limit) end
  local gpus = M.gpus_per_node(job)
  if gpus then add("--gres=gpu:" .. gpus) end
  if job.name and job.name ~= "" then add("--job-name=" .. job.name) end
  if job.array_inx and job.array_inx ~= "" then add("--array=" .. job.array_inx) end
  local req = {script = job.script or "", args = args, user = job.user_name,
               account = job.account, partition = job.partition, risk = M.config.risk,
               name = job.name}
  if M.config.cluster ~= "" then req.cluster = M.config.cluster end
  if #args == 0 then req.args = {__array = true} end
  return req
end

---------------------------------------------------------------------------------------------
-- Transport: one bounded child process per submission.
---------------------------------------------------------------------------------------------

local function shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function write_temp(content)
  local path = os.tmpname()  -- created mode 0600 by mkstemp
  local f = io.open(path, "w")
  if not f then return nil end
  f:write(content)
  f:close()
  return path
end

-- Runs `cmd`, returns its stdout and whether it exited 0.
local function run(cmd)
  local p = io.popen(cmd, "r")
  if not p then return nil, false end
  local out = p:read("*a")
  local ok = p:close()  -- Lua 5.1: close() gives no exit status; the marker below does
  local body, rc = out:match("^(.*)\n__rc=(%d+)\n?$")
  if rc then return body, rc == "0" end
  return out, ok ~= nil
end

-- POST over a LuaSocket TCP connection, all of it (connect, send, answer) within budget_s.
-- Returns the body of a 200 answer, or nil and why.
function M.http_post_socket(socket, url, body, budget_s)
  local host, port, path = url:match("^http://([%d%.]+):?(%d*)(/.*)$")
  if not host then return nil, "not an http://IP URL: " .. url end
  local deadline = socket.gettime() + budget_s
  local conn = socket.tcp()
  local function left() return math.max(0.001, deadline - socket.gettime()) end
  conn:settimeout(left())
  local ok, err = conn:connect(host, tonumber(port) or 80)
  if not ok then conn:close() return nil, "connect: " .. tostring(err) end
  local auth = ""
  if M.config.auth_header_file ~= "" then
    local f = io.open(M.config.auth_header_file, "r")
    if f then auth = (f:read("*l") or ""):gsub("%s+$", "") .. "\r\n" f:close() end
  end
  conn:settimeout(left())
  ok, err = conn:send("POST " .. path .. " HTTP/1.1\r\nHost: " .. host .. "\r\n" ..
                      "Content-Type: application/json\r\nContent-Length: " .. #body ..
                      "\r\nConnection: close\r\n" .. auth .. "\r\n" .. body)
  if not ok then conn:close() return nil, "send: " .. tostring(err) end
  local chunks = {}
  while true do
    if socket.gettime() >= deadline then conn:close() return nil, "timed out" end
    conn:settimeout(left())
    local data, rerr, partial = conn:receive(65536)
    if data then
      chunks[#chunks + 1] = data
    elseif rerr == "closed" then
      chunks[#chunks + 1] = partial
      break
    else
      conn:close()
      return nil, "took over " .. M.config.budget_ms .. " ms (" .. tostring(rerr) .. ")"
    end
  end
  conn:close()
  local answer = table.concat(chunks)
  local status = answer:match("^HTTP/1%.%d (%d+)")
  local head_end = answer:find("\r\n\r\n", 1, true)
  if status ~= "200" or not head_end then return nil, "HTTP " .. tostring(status) end
  local head, text = answer:sub(1, head_end), answer:sub(head_end + 4)
  if head:lower():find("transfer%-encoding:%s*chunked") then
    local out, i = {}, 1
    while true do
      local size_hex, line_end = text:match("^(%x+)[^\r]*\r\n()", i)
      local size = size_hex and tonumber(size_hex, 16)
      if not size or size == 0 then break end
      out[#out + 1] = text:sub(line_end, line_end + size - 1)
      i = line_end + size + 2
    end
    text = table.concat(out)
  end
  return text
end

-- LuaSocket when the settings and the server allow it (see http_client), else nil.
local function socket_module()
  local choice = M.config.http_client
  if choice == "curl" then return nil end
  if choice == "auto" and not M.config.server:match("^http://[%d%.]+[:/]") then return nil end
  local ok, socket = pcall(require, "socket")
  if ok and type(socket) == "table" and socket.tcp then return socket end
  return nil
end

-- Asks for a prediction; returns the decoded document or nil and why.
function M.predict(req)
  local budget_s = string.format("%.3f", M.config.budget_ms / 1000)
  local cmd, tmp
  if M.config.transport == "cli" then
    tmp = write_temp(req.script)
    if not tmp then return nil, "cannot write a temporary file" end
    local parts = {shell_quote(M.config.timeout), "-s", "KILL", budget_s,
                   shell_quote(M.config.cli)}
    if M.config.cli_db ~= "" then
      parts[#parts + 1] = "--db " .. shell_quote(M.config.cli_db)
    end
    parts[#parts + 1] = "predict --json " .. shell_quote(tmp)
    for _, k in ipairs({"user", "account", "partition", "cluster"}) do
      if req[k] and req[k] ~= "" then
        parts[#parts + 1] = "--" .. k .. " " .. shell_quote(req[k])
      end
    end
    parts[#parts + 1] = "--"
    for _, a in ipairs(req.args) do parts[#parts + 1] = shell_quote(a) end
    cmd = table.concat(parts, " ")
  else
    local socket = socket_module()
    if socket then
      local text, err = M.http_post_socket(socket, M.config.server .. "/api/v1/predict",
                                           M.encode(req), M.config.budget_ms / 1000)
      if not text then return nil, "prediction failed: " .. err end
      local parsed, doc = pcall(M.decode, text)
      if not parsed or type(doc) ~= "table" or type(doc.targets) ~= "table" then
        return nil, "unreadable prediction: " .. tostring(doc):sub(1, 200)
      end
      return doc, nil
    end
    tmp = write_temp(M.encode(req))
    if not tmp then return nil, "cannot write a temporary file" end
    cmd = table.concat({shell_quote(M.config.curl), "-sS", "--fail", "--max-time", budget_s,
                        "--connect-timeout", budget_s, "-H 'Content-Type: application/json'",
                        M.config.auth_header_file ~= "" and
                            ("-H @" .. shell_quote(M.config.auth_header_file)) or "",
                        "--data-binary", "@" .. shell_quote(tmp),
                        shell_quote(M.config.server .. "/api/v1/predict")}, " ")
  end
  local out, ok = run(cmd .. " 2>&1; echo \"__rc=$?\"")
  os.remove(tmp)
  if not ok then
    return nil, "prediction failed or took over " .. M.config.budget_ms .. " ms: " ..
        (out or ""):gsub("%s+$", ""):sub(1, 200)
  end
  local parsed, doc = pcall(M.decode, out)
  if not parsed or type(doc) ~= "table" or type(doc.targets) ~= "table" then
    return nil, "unreadable prediction: " .. tostring(doc):sub(1, 200)
  end
  return doc, nil
end

---------------------------------------------------------------------------------------------
-- Advice and enforcement
---------------------------------------------------------------------------------------------

local function fmt_mb(mb)
  if mb == nil then return "?" end
  if mb >= 10240 then return string.format("%.0fG", mb / 1024) end
  if mb >= 1024 then return string.format("%.1fG", mb / 1024) end
  return string.format("%.0fM", mb)
end

local function fmt_min(m)
  if m == nil then return "?" end
  m = math.ceil(m)
  if m >= 60 then return string.format("%d:%02d:00", math.floor(m / 60), m % 60) end
  return string.format("%d min", m)
end

local function num(v) if type(v) == "number" then return v end return nil end

-- The prediction in the job's units: memory MB, cores, minutes.
function M.summarize(doc)
  local t = doc.targets or {}
  local function target(name, scale)
    local x = t[name]
    if type(x) ~= "table" then return nil end
    local function s(v) v = num(v) if v then return v / scale end return nil end
    return {p50 = s(x.p50), p90 = s(x.p90), suggested = s(x.suggested_request),
            request = s(x.request), source = x.source,
            too_small = num(x.prob_request_too_small)}
  end
  return {mem = target("peak_memory", 1024 * 1024), cpus = target("cpu_cores", 1),
          time = target("runtime", 60), model = doc.model ~= nil}
end

-- Lowers a request to the suggestion within the floors and the largest cut; nil = no change.
function M.lowered(requested, suggested, floor)
  if not requested or not suggested or suggested >= requested then return nil end
  local cut = (requested - suggested) / requested
  if cut < M.config.min_cut then return nil end
  local v = math.max(suggested, floor, requested * (1 - M.config.max_cut))
  if v >= requested then return nil end
  return v
end

local function csv(...)
  local parts = {}
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    parts[i] = v and string.format("%.6g", v) or ""
  end
  return table.concat(parts, ",")
end

-- The output file SLURM will write, as a pattern (%j etc. resolved by `rightsize ingest`).
local function output_pattern(job)
  local out = job.std_out
  if not out or out == "" then
    out = (job.array_inx and job.array_inx ~= "") and "slurm-%A_%a.out" or "slurm-%j.out"
  end
  if out:sub(1, 1) ~= "/" and job.work_dir then out = job.work_dir .. "/" .. out end
  return out
end

-- Applies the mode to one job. Returns the admin-comment record and the lines told to the user.
-- Never raises an error on a bad prediction; changes job_desc only in enforce mode.
function M.apply(job_desc, job, mode, s)
  local lines, changed = {}, {}
  local mem_mb, mem_unit = M.memory_mb(job)
  local cpus = job.min_cpus
  local time_min = job.time_limit

  local parts = {}
  if s.mem and s.mem.p50 then
    parts[#parts + 1] = "memory " .. fmt_mb(s.mem.p50) ..
        (s.mem.p90 and (" (p90 " .. fmt_mb(s.mem.p90) .. ")") or "")
  end
  if s.cpus and s.cpus.p50 then
    parts[#parts + 1] = string.format("%.1f cores", s.cpus.p50)
  end
  if s.time and s.time.p50 then
    parts[#parts + 1] = string.format("run time %s", fmt_min(s.time.p50))
  end
  if #parts > 0 then lines[#lines + 1] = "predicted use: " .. table.concat(parts, ", ") end

  local sugg = {}
  if s.mem and s.mem.suggested and mem_mb then
    sugg[#sugg + 1] = string.format("--mem=%s (asked %s)", fmt_mb(s.mem.suggested), fmt_mb(mem_mb))
  end
  if s.cpus and s.cpus.suggested and cpus then
    sugg[#sugg + 1] = string.format("%d CPUs (asked %d)", math.ceil(s.cpus.suggested), cpus)
  end
  if s.time and s.time.suggested and time_min then
    sugg[#sugg + 1] = string.format("--time=%s (asked %s)", fmt_min(s.time.suggested),
                                    fmt_min(time_min))
  end
  if #sugg > 0 then lines[#lines + 1] = "suggested request: " .. table.concat(sugg, ", ") end
  -- Never raised: a request that is probably too small is only reported.
  if s.mem and s.mem.suggested and mem_mb and s.mem.suggested > mem_mb then
    lines[#lines + 1] = string.format("warning: --mem=%s is probably too small; not changed",
                                      fmt_mb(mem_mb))
  end
  if s.time and s.time.suggested and time_min and s.time.suggested > time_min then
    lines[#lines + 1] = string.format("warning: --time=%s is probably too short; not changed",
                                      fmt_min(time_min))
  end

  if mode == "enforce" then
    local v = s.mem and M.lowered(mem_mb, s.mem.suggested, M.config.floor_mem_mb)
    if v then
      v = math.ceil(v)
      if mem_unit == "cpu" then
        job_desc.min_mem_per_cpu = math.ceil(v / (cpus or 1))
      else
        job_desc.min_mem_per_node = math.ceil(v / (job.min_nodes or 1))
      end
      changed[#changed + 1] = "mem"
      lines[#lines + 1] = string.format("enforced: memory %s -> %s", fmt_mb(mem_mb), fmt_mb(v))
    end
    -- CPUs: only a plain request (no per-task layout to keep consistent).
    v = s.cpus and M.lowered(cpus, s.cpus.suggested, M.config.floor_cpus)
    if v and not job.num_tasks then
      v = math.ceil(v)
      if v < cpus then
        job_desc.min_cpus = v
        if job.cpus_per_task then job_desc.cpus_per_task = v end
        changed[#changed + 1] = "cpus"
        lines[#lines + 1] = string.format("enforced: CPUs %d -> %d", cpus, v)
      end
    end
    v = s.time and M.lowered(time_min, s.time.suggested, M.config.floor_time_min)
    if v then
      v = math.ceil(v)
      job_desc.time_limit = v
      changed[#changed + 1] = "time"
      lines[#lines + 1] = string.format("enforced: time limit %s -> %s", fmt_min(time_min),
                                        fmt_min(v))
    end
    if #changed > 0 then
      lines[#lines + 1] = "to keep your request: --comment=rightsize:advise"
    end
  end

  local record = {"rightsize:v1", "mode=" .. mode}
  if s.mem then
    record[#record + 1] = "mem_mb=" .. csv(s.mem.p50, s.mem.suggested, mem_mb)
  end
  if s.cpus then
    record[#record + 1] = "cpus=" .. csv(s.cpus.p50, s.cpus.suggested, cpus)
  end
  if s.time then
    record[#record + 1] = "time_min=" .. csv(s.time.p50, s.time.suggested, time_min)
  end
  if #changed > 0 then record[#record + 1] = "changed=" .. table.concat(changed, ",") end
  record[#record + 1] = "out=" .. output_pattern(job)
  return table.concat(record, " "), lines
end

-- The partition a job without --partition goes to: the default one in part_list (slurmctld
-- fills job_desc.partition only after this hook).
function M.default_partition(part_list)
  if type(part_list) ~= "table" then return nil end
  for name, part in pairs(part_list) do
    local ok, flag = pcall(function() return part.flag_default end)
    if ok and (flag == 1 or flag == true) then
      local ok2, n = pcall(function() return part.name end)
      return (ok2 and n) or (type(name) == "string" and name) or nil
    end
  end
  return nil
end

-- The whole hook for one job; errors are caught by the caller.
function M.handle(job_desc, submit_uid, part_list)
  if M.auto_reload then M.reload_config(M.config_path) end
  local job = M.read_job(job_desc, submit_uid)
  job.partition = job.partition or M.default_partition(part_list)
  local mode, why = M.mode_for(job)
  if mode == "off" then
    if why then log_info("job %s of %s: %s", tostring(job.name), job.user_name, why) end
    return
  end
  if not job.script or job.script == "" then return end  -- srun/salloc: no batch script
  local doc, err = M.predict(M.build_request(job))
  if not doc then
    log_info("job %s of %s: no prediction (%s); submitted unchanged", tostring(job.name),
             job.user_name, err)
    return
  end
  local record, lines = M.apply(job_desc, job, mode, M.summarize(doc))
  for _, l in ipairs(lines) do log_user("%s", l) end
  local old = job.admin_comment
  job_desc.admin_comment = (old and old ~= "") and (old .. "; " .. record) or record
  log_info("job %s of %s: %s", tostring(job.name), job.user_name, record)
end

---------------------------------------------------------------------------------------------
-- The plugin's entry points
---------------------------------------------------------------------------------------------

function slurm_job_submit(job_desc, part_list, submit_uid)
  local ok, err = pcall(M.handle, job_desc, submit_uid, part_list)
  if not ok then log_info("error (job submitted unchanged): %s", tostring(err)) end
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end

M.config_path = os.getenv("RIGHTSIZE_HOOK_CONF") or M.config.config_file
M.auto_reload = true
M.reload_config(M.config_path)
RIGHTSIZE_HOOK = M  -- for tests (test/deploy/job_submit_lua_test.lua)
log_info("job_submit.lua loaded: transport %s (%s), budget %d ms, default mode %s",
         M.config.transport, socket_module() and "LuaSocket" or "curl", M.config.budget_ms,
         M.config.mode)
return slurm.SUCCESS
