#!/usr/bin/env python3
"""The thread-safety build: every source under src/ compiled by clang with -Wthread-safety as an
error, with the flags CMake gives it (compile_commands.json), so that a member declared
GUARDED_BY(mu_) touched without mu_ held fails `make test`. A probe with a deliberate violation
must fail the same way, so the check itself is known to bite.

usage: thread_safety.py BUILD_DIR SOURCE_DIR [CLANG]
"""
import json
import os
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

FLAGS = ["-fsyntax-only", "-Wno-everything", "-Wthread-safety", "-Werror=thread-safety"]


def clang_args(entry, clang):
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    out = [clang]
    skip = False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD") or a == entry["file"]:
            continue
        if a == "ccache" or a.endswith("/ccache"):
            continue
        out.append(a)
    # ccache as the launcher leaves the real compiler as the first word: drop it.
    if len(out) > 1 and (out[1].endswith("c++") or out[1].endswith("g++") or out[1].endswith("cc")):
        del out[1]
    return out + FLAGS + [entry["file"]]


def check(entry, clang):
    r = subprocess.run(clang_args(entry, clang), capture_output=True, text=True,
                       cwd=entry["directory"])
    return entry["file"], r.returncode, r.stderr


def main():
    build, source = sys.argv[1], os.path.realpath(sys.argv[2])
    clang = sys.argv[3] if len(sys.argv) > 3 else "clang++"
    entries = json.load(open(os.path.join(build, "compile_commands.json")))
    src = os.path.join(source, "src") + os.sep
    ours = [e for e in entries if os.path.realpath(e["file"]).startswith(src)]
    if not ours:
        print("thread_safety: no sources of src/ in compile_commands.json")
        return 1
    # The probe, compiled with the flags of a core source.
    core = next(e for e in ours if "/src/core/" in e["file"])
    probe = dict(core)
    probe["file"] = os.path.join(source, "test", "build", "thread_safety_probe.cc")
    _, rc, err = check(probe, clang)
    if rc == 0 or "requires holding mutex" not in err:
        print("thread_safety: the probe with an unguarded write compiled cleanly: the check "
              "does not bite\n" + err)
        return 1
    failed = 0
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for path, rc, err in pool.map(lambda e: check(e, clang), ours):
            if rc != 0:
                failed += 1
                print(f"thread_safety: {os.path.relpath(path, source)}:\n{err}")
    print(f"thread_safety: {len(ours) - failed} of {len(ours)} sources clean; the probe fails as "
          "it must")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
