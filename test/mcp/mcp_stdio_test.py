#!/usr/bin/env python3
"""`rightsize mcp` as an MCP client drives it: the real binary on a pipe, a small store made
from test/data, every tool and resource called, malformed and oversized messages sent.

Usage: mcp_stdio_test.py RIGHTSIZE TESTDIR SRCDIR
"""
import json
import os
import subprocess
import sys
import tempfile

RS, TESTDIR, SRCDIR = sys.argv[1:4]
DATA = os.path.join(TESTDIR, "data")
passed = failed = 0


def check(what, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok: {what}")
    else:
        failed += 1
        print(f"FAIL: {what} {str(detail)[:600]}")


work = tempfile.mkdtemp(prefix="rightsize-mcp-test.")
db = os.path.join(work, "store.db")
for f, cluster in (("mixed.psv", "c1"), ("oom-cgroup-v1.psv", "v1")):
    subprocess.run([RS, "--db", db, "ingest", "sacct", os.path.join(DATA, "sacct/slurm22", f),
                    "--cluster", cluster], check=True, capture_output=True)

proc = subprocess.Popen([RS, "--db", db, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE)
next_id = 0


def send_line(line):
    proc.stdin.write(line if isinstance(line, bytes) else line.encode())
    proc.stdin.write(b"\n")
    proc.stdin.flush()


def answer():
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"the server closed its output; stderr: {proc.stderr.read()[:2000]}")
    return json.loads(line)


def request(method, params=None):
    global next_id
    next_id += 1
    msg = {"jsonrpc": "2.0", "id": next_id, "method": method}
    if params is not None:
        msg["params"] = params
    send_line(json.dumps(msg))
    a = answer()
    check(f"{method}: the answer has the request's id", a.get("id") == next_id, a)
    return a


def call(tool, args):
    a = request("tools/call", {"name": tool, "arguments": args})
    return a.get("result", {})


a = request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "mcp_stdio_test", "version": "1"}})
check("initialize agrees on 2025-06-18", a["result"]["protocolVersion"] == "2025-06-18", a)
send_line(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
check("ping", request("ping")["result"] == {})

tools = {t["name"]: t for t in request("tools/list")["result"]["tools"]}
check("six tools", sorted(tools) == ["advise", "diagnose", "eval", "job", "predict", "report"],
      sorted(tools))


def expect_doc(tool, args, schema):
    r = call(tool, args)
    doc = r.get("structuredContent")
    ok = not r.get("isError") and isinstance(doc, dict) and doc.get("schema") == schema
    check(f"{tool} answers {schema}", ok, r)
    if ok:
        check(f"{tool}: the text block is the same document",
              json.loads(r["content"][0]["text"]) == doc)
        out = tools[tool]["outputSchema"]
        missing = [k for k in out.get("required", []) if k not in doc]
        check(f"{tool}: every field its outputSchema requires", not missing, missing)
    return doc or {}


scripts = os.path.join(DATA, "scripts")
code = os.path.join(DATA, "code/gpt2_finetune")
doc = expect_doc("predict", {"script": os.path.join(code, "train.sh"), "cluster": "c1",
                             "user": "root"}, "rightsize.predict/v1")
check("predict: the script's 64G is the memory request",
      doc.get("targets", {}).get("peak_memory", {}).get("request") == 64 * 2**30, doc.get("targets"))
expect_doc("predict", {"script_text": open(os.path.join(scripts, "gpu_a100.sh")).read(),
                       "cluster": "c1"}, "rightsize.predict/v1")
doc = expect_doc("advise", {"script": os.path.join(code, "train.sh")}, "rightsize.advise/v1")
check("advise reads the code next to the script", doc.get("code_dir") == code, doc.get("code_dir"))
check("advise sizes the GPU memory", isinstance(doc.get("gpu_memory"), dict), doc)
doc = expect_doc("diagnose", {"job_id": "11", "cluster": "v1"}, "rightsize.diagnosis/v1")
check("diagnose 11: host_oom", doc.get("class") == "host_oom", doc.get("class"))
log = os.path.join(DATA, "failures/dev/gpu_oom/pt2_fragmentation.log")
doc = expect_doc("diagnose", {"log_paths": [log]}, "rightsize.diagnosis/v1")
check("diagnose a log file: gpu_oom", doc.get("class") == "gpu_oom", doc.get("class"))
doc = expect_doc("diagnose", {"log_text": open(log).read()}, "rightsize.diagnosis/v1")
check("diagnose log text: gpu_oom", doc.get("class") == "gpu_oom", doc.get("class"))
doc = expect_doc("job", {"job_id": "11", "cluster": "v1"}, "rightsize.job/v1")
check("job 11 carries the diagnosis kept by diagnose",
      (doc.get("diagnosis") or {}).get("class") == "host_oom", doc.get("diagnosis"))
doc = expect_doc("report", {"cluster": "c1", "top": 3}, "rightsize.report/v1")
cli = json.loads(subprocess.run([RS, "--db", db, "report", "--cluster", "c1", "--top", "3",
                                 "--json"], check=True, capture_output=True, text=True).stdout)
check("report: the same document as `report --json`", doc == cli)
trace = os.path.join(SRCDIR, "data/traces/HPC2N-excerpt-alea.swf.gz")
doc = expect_doc("eval", {"trace": trace, "retrain_every_s": 30 * 86400}, "rightsize.eval/v1")
check("eval scored jobs", doc.get("jobs", 0) > 0, doc.get("jobs"))

# Failures the model reads: isError results.
for tool, args, why in (("job", {"job_id": "nope"}, "nope"),
                        ("job", {}, "job_id"),
                        ("report", {"by": "planet"}, "planet"),
                        ("predict", {"script": os.path.join(work, "missing.sh")}, "missing.sh"),
                        ("diagnose", {"log_paths": ["-"]}, "log_text"),
                        ("eval", {"trace": trace, "test_fraction": 2}, "test_fraction")):
    r = call(tool, args)
    check(f"{tool} {args}: an isError result naming {why}",
          r.get("isError") is True and why in r["content"][0]["text"], r)

# Resources.
tpl = request("resources/templates/list")["result"]["resourceTemplates"]
check("two resource templates", [t["uriTemplate"] for t in tpl] ==
      ["rightsize://job/{id}", "rightsize://job/{id}/series"], tpl)
res = request("resources/list")["result"]["resources"]
check("resources/list lists the store's jobs", len(res) == 12, len(res))
for uri, key in (("rightsize://job/2?cluster=c1", "schema"),
                 ("rightsize://job/2/series?cluster=c1", "series"),
                 (res[0]["uri"], "schema")):
    r = request("resources/read", {"uri": uri})
    c = r.get("result", {}).get("contents", [{}])[0]
    check(f"read {uri}", c.get("uri") == uri and key in json.loads(c.get("text", "{}")), r)
r = request("resources/read", {"uri": "rightsize://job/424242"})
check("an unknown job is -32002", r.get("error", {}).get("code") == -32002, r)

# Malformed messages: JSON-RPC errors, and the server goes on.
for line, code_ in ((b"{oops", -32700), (b"\xc3\x28", -32700), (b"[]", -32600),
                    (b'"hello"', -32600), (b'{"jsonrpc":"1.0","id":1,"method":"ping"}', -32600),
                    (b'{"jsonrpc":"2.0","id":1,"method":"nope/nope"}', -32601),
                    (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rm"}}',
                     -32602),
                    (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":7}', -32602)):
    send_line(line)
    a = answer()
    check(f"{line[:40]!r}: error {code_}", a.get("error", {}).get("code") == code_, a)
# A 300 MiB line, past the 64 MiB limit, sent as a client would stream it: refused, and the
# server's memory stays bounded: its peak RSS is ~110 MiB here (what the tools above left
# resident plus the 64 MiB the line fills before it is dropped); unbounded would be 300+.
with open(f"/proc/{proc.pid}/clear_refs", "w") as f:
    f.write("5")  # resets the peak RSS: eval's, above, is not the line's
chunk = b"x" * (1 << 20)
for _ in range(300):
    proc.stdin.write(chunk)
send_line(b"")
a = answer()
check("a 300 MiB line is refused", a.get("error", {}).get("code") == -32600 and
      "too large" in a["error"]["message"], a)
with open(f"/proc/{proc.pid}/status") as f:
    hwm_kib = next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))
check(f"the server's peak memory stayed bounded ({hwm_kib // 1024} MiB < 200 MiB)",
      hwm_kib < 200 * 1024, hwm_kib)
check("and the server still answers", request("ping")["result"] == {})

proc.stdin.close()
rc = proc.wait(timeout=60)
rest = proc.stdout.read()
check("exits 0 at the end of its input", rc == 0, proc.stderr.read()[:2000])
check("nothing but answers on standard output", rest == b"", rest[:200])
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
