-- Logic tests of deploy/slurm/job_submit.lua without slurmctld: a stub `slurm` table, job_desc
-- as a plain table, and fake curl programs. The plugin inside a real slurmctld is tested by
-- test/integration/slurm/submit_hook_slurm_test.sh.
-- Usage: lua5.1 job_submit_lua_test.lua SRCDIR
local srcdir = arg[1] or "."
local passed, failed = 0, 0
local function check(what, cond, detail)
  if cond then passed = passed + 1; print("ok: " .. what)
  else failed = failed + 1; print("FAIL: " .. what .. (detail and (": " .. tostring(detail)) or "")) end
end

local user_lines, info_lines = {}, {}
slurm = {
  SUCCESS = 0, ERROR = -1, NO_VAL = 4294967294,
  log_user = function(fmt, ...) user_lines[#user_lines + 1] = string.format(fmt, ...) end,
  log_info = function(fmt, ...) info_lines[#info_lines + 1] = string.format(fmt, ...) end,
}
local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. tmp)
-- A config file the hook reads at load.
local conf = io.open(tmp .. "/rightsize.conf", "w")
conf:write([[
# test config
server = http://127.0.0.1:9   # nothing listens on the discard port
budget_ms = 300
mode = advise
mode.partition.big = enforce
mode.account.physics = off
floor_mem_mb = 512
bogus_key = 1
]])
conf:close()
os.execute("env RIGHTSIZE_HOOK_CONF=" .. tmp .. "/rightsize.conf true")  -- (documentation)
local real_getenv = os.getenv
os.getenv = function(k)
  if k == "RIGHTSIZE_HOOK_CONF" then return tmp .. "/rightsize.conf" end
  return real_getenv(k)
end
local rc = dofile(srcdir .. "/deploy/slurm/job_submit.lua")
os.getenv = real_getenv
local M = RIGHTSIZE_HOOK
M.auto_reload = false  -- the cases below set M.config directly
M.config.http_client = "curl"  -- the fake curl programs below; LuaSocket is tested at the end
check("the file returns SUCCESS when loaded", rc == 0)
check("config: server read", M.config.server == "http://127.0.0.1:9")
check("config: numbers read as numbers", M.config.budget_ms == 300 and M.config.floor_mem_mb == 512)
check("config: per-partition mode", M.modes.partition.big == "enforce")
local warned = false
for _, l in ipairs(info_lines) do if l:find("unknown key bogus_key", 1, true) then warned = true end end
check("config: an unknown key is logged", warned)

-- Modes
check("default mode", (M.mode_for({partition = "debug"})) == "advise")
check("partition mode", (M.mode_for({partition = "big"})) == "enforce")
check("account wins over partition", (M.mode_for({partition = "big", account = "physics"})) == "off")
check("opt out with the comment", (M.mode_for({partition = "big", comment = "x rightsize:off"})) == "off")
check("opt out of enforcement only",
      (M.mode_for({partition = "big", comment = "rightsize:advise"})) == "advise")

-- JSON
local doc = M.decode('{"a": [1, 2.5e3, -3], "b": {"c": null, "d": "x\\"y\\n\\u0041"}, ' ..
                     '"e": true, "f": false, "g": []}')
check("decode numbers", doc.a[1] == 1 and doc.a[2] == 2500 and doc.a[3] == -3)
check("decode strings and escapes", doc.b.d == 'x"y\nA', doc.b.d)
check("decode null, booleans, empty array", doc.b.c == nil and doc.e == true and doc.f == false
      and #doc.g == 0)
check("decode rejects junk", not pcall(M.decode, "<html>"))
local enc = M.encode({script = "#!/bin/sh\necho \"hi\"\t\1", args = {"--mem=1M"}, n = 2})
check("encode", enc == '{"args":["--mem=1M"],"n":2,"script":"#!/bin/sh\\necho \\"hi\\"\\t\\u0001"}', enc)

-- The request from job_desc
local job_desc = {script = "#!/bin/bash\n#SBATCH --mem=4G\nsleep 1\n", name = "train",
                  partition = "big", account = "ml", user_name = "alice",
                  min_mem_per_node = 8192, min_cpus = 8, cpus_per_task = 8,
                  num_tasks = slurm.NO_VAL, time_limit = 600, tres_per_node = "gres:gpu:2",
                  array_inx = "1-4", work_dir = "/home/alice", std_out = nil}
local job = M.read_job(job_desc, 1000)
check("NO_VAL reads as unset", job.num_tasks == nil)
local req = M.build_request(job)
local args = table.concat(req.args, " ")
check("request args from job_desc", args ==
      "--mem=8192M --cpus-per-task=8 --time=600 --gres=gpu:2 --job-name=train --array=1-4", args)
check("request user/account/partition", req.user == "alice" and req.account == "ml"
      and req.partition == "big")
check("gpus from tres_per_node forms", M.gpus_per_node({tres_per_node = "gres/gpu:a100=4"}) == 4
      and M.gpus_per_node({tres_per_node = "gres:gpu:1"}) == 1
      and M.gpus_per_node({tres_per_node = "gres:gpu"}) == 1)
local mem_cpu = M.read_job({min_mem_per_cpu = 1000, min_cpus = 4, script = "x"}, 0)
check("memory per CPU totals", (M.memory_mb(mem_cpu)) == 4000)

-- A prediction: 2.5 GiB p50, 3 GiB suggested; 2 cores; 30 min suggested.
local GiB = 1024 * 1024 * 1024
local pred = {model = {version = 1}, targets = {
  peak_memory = {p50 = 2.5 * GiB, p90 = 2.8 * GiB, suggested_request = 3 * GiB,
                 request = 8 * GiB, source = "model"},
  cpu_cores = {p50 = 1.8, suggested_request = 2, request = 8, source = "model"},
  runtime = {p50 = 1200, suggested_request = 1800, request = 36000, source = "model"}}}
local s = M.summarize(pred)
check("summary in MB and minutes", s.mem.suggested == 3072 and s.time.suggested == 30)

-- advise: tells, changes nothing
user_lines = {}
local d = {}
local record, lines = M.apply(d, job, "advise", s)
check("advise changes nothing", next(d) == nil)
check("advise tells the predicted use", lines[1]:find("predicted use: memory 2.5G", 1, true), lines[1])
check("advise tells the suggested request", lines[2]:find("--mem=3.0G (asked 8.0G)", 1, true), lines[2])
check("record", record == "rightsize:v1 mode=advise mem_mb=2560,3072,8192 cpus=1.8,2,8 " ..
      "time_min=20,30,600 out=/home/alice/slurm-%A_%a.out", record)

-- enforce: lowers within floors and the largest cut
d = {}
record, lines = M.apply(d, job, "enforce", s)
check("enforce lowers memory", d.min_mem_per_node == 3072, d.min_mem_per_node)
check("enforce lowers CPUs", d.min_cpus == 2 and d.cpus_per_task == 2, d.min_cpus)
-- 600 min asked, 30 suggested: max_cut 0.75 keeps 150
check("enforce never cuts more than max_cut", d.time_limit == 150, d.time_limit)
check("enforce says what it changed", table.concat(lines, "\n"):find("enforced: memory 8.0G -> 3.0G", 1, true))
check("record lists the changes", record:find("changed=mem,cpus,time", 1, true), record)

-- floors: 1 GiB asked, 300 MB suggested, floor 512
d = {}
local small = M.read_job({min_mem_per_node = 1024, min_cpus = 1, time_limit = 60, script = "x"}, 0)
M.apply(d, small, "enforce", {mem = {p50 = 200, suggested = 300}})
check("enforce respects the memory floor", d.min_mem_per_node == 512, d.min_mem_per_node)
-- min_cut: 1000 asked, 900 suggested: 10 % is under min_cut, no change
d = {}
M.apply(d, M.read_job({min_mem_per_node = 1000, script = "x"}, 0), "enforce",
        {mem = {p50 = 800, suggested = 900}})
check("enforce leaves small cuts alone", d.min_mem_per_node == nil)
-- never raises
d = {}
record, lines = M.apply(d, M.read_job({min_mem_per_node = 1000, time_limit = 10, script = "x"}, 0),
                        "enforce", {mem = {p50 = 1500, suggested = 2048},
                                    time = {p50 = 20, suggested = 30}})
check("enforce never raises", d.min_mem_per_node == nil and d.time_limit == nil)
check("but says the request is too small", table.concat(lines, "\n"):find("probably too small", 1, true))
check("and too short", table.concat(lines, "\n"):find("probably too short", 1, true))
-- memory per CPU is lowered per CPU
d = {}
M.apply(d, M.read_job({min_mem_per_cpu = 2048, min_cpus = 4, script = "x"}, 0), "enforce",
        {mem = {p50 = 2000, suggested = 3072}})
check("memory per CPU lowered per CPU", d.min_mem_per_cpu == 768, d.min_mem_per_cpu)

-- Through slurm_job_submit with fake curl programs: fails open on every error.
local function fake_curl(body, exit_code)
  local path = tmp .. "/curl-" .. exit_code .. "-" .. #body
  local f = io.open(path, "w")
  f:write("#!/bin/sh\ncat <<'EOF'\n" .. body .. "\nEOF\nexit " .. exit_code .. "\n")
  f:close()
  os.execute("chmod +x " .. path)
  return path
end
local function submit(desc)
  user_lines, info_lines = {}, {}
  return slurm_job_submit(desc, {}, 1000)
end
local function fresh() return {script = "#!/bin/sh\nsleep 1\n", name = "j", partition = "big",
                               min_mem_per_node = 8192, min_cpus = 1, time_limit = 600} end

M.config.curl = fake_curl('{"schema":"rightsize.predict/v1","model":null,"targets":{' ..
                          '"peak_memory":{"p50":1073741824,"suggested_request":2147483648}}}', 0)
d = fresh()
check("a good answer: SUCCESS", submit(d) == 0)
check("a good answer: memory lowered", d.min_mem_per_node == 2048, d.min_mem_per_node)
check("a good answer: the admin comment", (d.admin_comment or ""):find("^rightsize:v1 mode=enforce mem_mb=1024,2048,8192"),
      d.admin_comment)
check("a good answer: the user is told", #user_lines >= 2, #user_lines)
d = fresh(); d.admin_comment = "site note"
submit(d)
check("an existing admin comment is kept", (d.admin_comment or ""):find("^site note; rightsize:v1"), d.admin_comment)

for _, case in ipairs({{"an HTTP error", fake_curl("curl: (22) 500", 22)},
                       {"junk", fake_curl("<html>oops</html>", 0)},
                       {"no targets", fake_curl('{"error":"x"}', 0)},
                       {"a missing curl", tmp .. "/no-such-curl"}}) do
  M.config.curl = case[2]
  d = fresh()
  local r = submit(d)
  check(case[1] .. ": SUCCESS, job unchanged", r == 0 and d.min_mem_per_node == 8192
        and d.admin_comment == nil and #user_lines == 0)
  check(case[1] .. ": logged", table.concat(info_lines, "\n"):find("submitted unchanged", 1, true),
        table.concat(info_lines, "\n"))
end

-- A bug (job_desc that throws) is caught too.
local throwing = setmetatable({}, {__index = function() error("boom") end,
                                   __newindex = function() error("boom") end})
check("a throwing job_desc: SUCCESS", submit(throwing) == 0)
-- No --partition: the mode of the default partition in part_list applies.
M.config.curl = fake_curl('{"targets":{"peak_memory":{"p50":1073741824,"suggested_request":2147483648}}}', 0)
d = fresh(); d.partition = nil
user_lines, info_lines = {}, {}
slurm_job_submit(d, {debug = {name = "debug", flag_default = 0}, big = {name = "big", flag_default = 1}}, 1000)
check("no --partition: the default partition's mode (enforce)", d.min_mem_per_node == 2048, d.min_mem_per_node)
d = fresh(); d.partition = nil
slurm_job_submit(d, {big = {name = "big", flag_default = 0}}, 1000)
check("no default partition: the default mode (advise)", d.min_mem_per_node == 8192
      and (d.admin_comment or ""):find("mode=advise", 1, true), d.admin_comment)
-- Opted out: no request made at all.
M.config.curl = tmp .. "/must-not-run"
d = fresh(); d.comment = "rightsize:off"
check("opted out: SUCCESS, unchanged", submit(d) == 0 and d.admin_comment == nil)

-- The real curl against a port nothing listens on: fails open, fast.
M.config.curl = "/usr/bin/curl"
M.config.server = "http://127.0.0.1:9"
d = fresh()
local t0 = os.time()
check("server down (real curl): SUCCESS", submit(d) == 0 and d.min_mem_per_node == 8192)
check("server down: within the budget", os.time() - t0 <= 1)

-- LuaSocket (when installed): no child process, the same budget and the same failing open.
local have_socket = pcall(require, "socket")
if have_socket then
  M.config.http_client = "auto"
  local function serve(delay_s, status)  -- a one-answer HTTP server; returns its port
    local port_file = tmp .. "/port"
    os.remove(port_file)
    os.execute(string.format([[python3 -c '
import http.server, json, time
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(%g)
        body = json.dumps({"targets": {"peak_memory": {"p50": 1073741824,
                                                       "suggested_request": 2147483648}}}).encode()
        self.send_response(%d); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open("%s", "w").write(str(s.server_address[1]))
s.timeout = 10; s.handle_request()' >/dev/null 2>&1 &]], delay_s, status, port_file))
    for _ = 1, 100 do
      local f = io.open(port_file, "r")
      local port = f and f:read("*a")
      if f then f:close() end
      if port and port ~= "" then return port end
      os.execute("sleep 0.05")
    end
    error("test server did not start")
  end
  local socket = require("socket")
  M.config.server = "http://127.0.0.1:" .. serve(0, 200)
  d = fresh()
  check("LuaSocket: a good answer", submit(d) == 0 and d.min_mem_per_node == 2048, d.min_mem_per_node)
  M.config.server = "http://127.0.0.1:" .. serve(0, 500)
  d = fresh()
  check("LuaSocket: HTTP 500 fails open", submit(d) == 0 and d.min_mem_per_node == 8192
        and table.concat(info_lines, "\n"):find("HTTP 500", 1, true), table.concat(info_lines))
  M.config.server = "http://127.0.0.1:" .. serve(2, 200)
  d = fresh()
  local t0 = socket.gettime()
  check("LuaSocket: a slow server fails open", submit(d) == 0 and d.min_mem_per_node == 8192)
  local took = socket.gettime() - t0
  check("LuaSocket: within the budget (" .. math.floor(took * 1000) .. " ms)", took < 0.5)
  M.config.server = "http://127.0.0.1:9"
  d = fresh()
  check("LuaSocket: server down fails open", submit(d) == 0 and d.min_mem_per_node == 8192)
else
  print("note: LuaSocket (lua-socket) not installed: its transport is not tested here")
end

-- The file is read again at each submission: an edit takes effect without a reconfigure.
M.auto_reload = true
local f = io.open(tmp .. "/rightsize.conf", "a")
f:write("mode.account.ml = off\n")
f:close()
d = fresh(); d.account = "ml"
M.config.curl = tmp .. "/must-not-run"
check("config edits apply at the next submission", submit(d) == 0 and d.admin_comment == nil
      and M.modes.account.ml == "off")

os.execute("rm -rf " .. tmp)
print(string.format("%d passed, %d failed", passed, failed))
os.exit(failed == 0 and 0 or 1)
