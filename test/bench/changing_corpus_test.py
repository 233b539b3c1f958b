#!/usr/bin/env python3
"""The corpus of changing programs (bench/corpus/changing.py) without running a program:
`generate` writes the same bytes twice, and the corpus (its digest) the measured excerpt in
test/data/corpus-changing/ was measured on (so the measured documents describe the programs the
generator writes); the schedule has what the corpus promises (every user starts with `new`, about one run in
six changes, each change touches the job script or the code); the excerpt's documents carry the
contract's keys; and `baselines` replays them with the predictions worked out here by hand.

Usage: changing_corpus_test.py SOURCE_DIR"""
import filecmp
import glob
import json
import os
import subprocess
import sys
import tempfile

SRC = sys.argv[1]
TOOL = os.path.join(SRC, "bench", "corpus", "changing.py")
EXCERPT = os.path.join(SRC, "test", "data", "corpus-changing")
FAILED = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        FAILED.append(what)


def same_tree(a, b):
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.diff_files or cmp.funny_files:
        return False
    return all(same_tree(os.path.join(a, d), os.path.join(b, d)) for d in cmp.common_dirs)


def generate(out):
    p = subprocess.run([sys.executable, TOOL, "generate", "--seed", "25", "--out", out],
                       capture_output=True, text=True)
    check(p.returncode == 0, "generate --seed 25 succeeds (%s)" % p.stderr.strip()[-200:])
    return p.stdout


def main():
    with tempfile.TemporaryDirectory() as tmp:
        a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
        generate(a)
        generate(b)
        check(same_tree(a, b), "generate writes the same bytes twice")
        with open(os.path.join(a, "manifest.json")) as f:
            man = json.load(f)
        runs = man["runs"]
        kinds = {"new", "none", "batch", "seq", "width", "depth", "precision", "ckpt",
                 "optimizer", "workers", "family"}
        check(all(r["change_kind"] in kinds for r in runs), "every change_kind is a known one")
        firsts = [r for r in runs if r["step"] == 0]
        check(len(firsts) == len(man["users"]) and all(r["change_kind"] == "new" for r in firsts),
              "each user's first run is `new`")
        changed = [r for r in runs if r["change_kind"] not in ("none", "new")]
        share = len(changed) / float(len(runs) - len(firsts))
        check(0.10 < share < 0.25, "about one run in six changes (%.3f)" % share)
        check(len({r["change_kind"] for r in changed}) == 9, "all nine kinds of change occur")
        times = [r["submit_time"] for r in runs]
        check(times == sorted(times), "runs are listed in submit order")
        # A change changes what the job runs: its sbatch line, its code or its config.
        by_id = {r["id"]: r for r in runs}
        unchanged_kept, changed_moved = 0, 0
        for r in runs:
            if r["step"] == 0:
                continue
            prev = by_id["%s-%04d" % (r["user"], r["step"])]
            same = (r["argv"] == prev["argv"] and r["sha256"] == prev["sha256"] and
                    _config(a, r) == _config(a, prev))
            if r["change_kind"] == "none" and same and r["program"] == prev["program"]:
                unchanged_kept += 1
            if r["change_kind"] not in ("none", "new") and not same:
                changed_moved += 1
        n_none = sum(1 for r in runs if r["change_kind"] == "none")
        check(unchanged_kept == n_none, "an unchanged rerun runs the same script, code and config "
              "(%d of %d)" % (unchanged_kept, n_none))
        check(changed_moved == len(changed), "every change shows in the script, code or config "
              "(%d of %d)" % (changed_moved, len(changed)))
        # The excerpt: real measured documents of programs the generator writes.
        files = glob.glob(os.path.join(EXCERPT, "*.jsonl"))
        check(len(files) == 1, "the excerpt has one .jsonl")
        docs = [json.loads(line) for line in open(files[0]) if line.strip()]
        users = {d["corpus"]["user"] for d in docs}
        check(len(users) == 3 and len(docs) >= 45, "the excerpt holds 3 users (%d runs)" % len(docs))
        for d in docs:
            c, job = d["corpus"], d["job"]
            ok = (d["schema"] == "rightsize.run/v1" and d.get("record") == job and
                  job["job_id"] == c["id"] and
                  job["request"]["user"] == c["user"] and
                  job["request"]["job_name"] == c["program"] and job["cluster"] == "corpus" and
                  job["submit_time"] == by_id[c["id"]]["submit_time"] and
                  job["start_time"] == job["submit_time"] and
                  c["script"] == "runs/%s/job.sbatch" % c["id"] and
                  c["change_kind"] == by_id[c["id"]]["change_kind"])
            if not ok:
                check(False, "%s carries the contract's keys" % c["id"])
                break
            if not os.path.isfile(os.path.join(a, c["script"])):
                check(False, "%s's script is one generate writes" % c["id"])
                break
        else:
            check(True, "every excerpt document carries the contract's keys, and its script is "
                  "one generate writes")
        # The excerpt was measured on the programs of this digest: generate still writes them.
        sources = open(os.path.join(EXCERPT, "SOURCES")).read()
        check("corpus digest %s)" % changing_digest(a) in sources,
              "generate --seed 25 writes the corpus the excerpt was measured on (digest)")
        check(any(d["corpus"]["change_kind"] not in ("none", "new") for d in docs),
              "the excerpt has runs right after a change")
        # baselines: the first scored run's user_mean and last2, worked out here.
        p = subprocess.run([sys.executable, TOOL, "baselines", files[0]], capture_output=True,
                           text=True)
        check(p.returncode == 0 and "after a change" in p.stdout and "unchanged" in p.stdout,
              "baselines prints both groups (%s)" % p.stderr.strip()[-200:])
        sys.path.insert(0, os.path.dirname(TOOL))
        import changing
        rows = [changing.flat(d) for d in changing.read_docs(files[0])]
        for r in rows:
            r["peak_rss_bytes"] = float(r["peak_rss_bytes"])
        scored = changing.replay(rows)
        r, pred = scored[0]
        hist = [h for h in rows if h["user"] == r["user"] and h["submit_time"] < r["submit_time"]
                and h["program"] == r["program"] and h["outcome"] == "COMPLETED"]
        mem = [h["peak_rss_bytes"] for h in hist]
        check(len(hist) >= 3 and abs(pred["peak_rss_bytes"]["user_mean"] - sum(mem) / len(mem))
              < 1 and abs(pred["peak_rss_bytes"]["last2"] - (mem[-1] + mem[-2]) / 2) < 1,
              "the first scored run's user_mean and last2 are the mean of its history and of "
              "its last two runs")
        vpa = pred["peak_rss_bytes"]["vpa"]
        check(min(mem) * 1.15 - 1 <= vpa <= max(mem) * 1.15 + 1,
              "VPA is a value of the history × 1.15")
    print("%d failed" % len(FAILED))
    return 1 if FAILED else 0


def changing_digest(root):
    sys.path.insert(0, os.path.dirname(TOOL))
    import changing
    with open(os.path.join(root, "manifest.json")) as f:
        return changing.digest(json.load(f))


def _config(root, r):
    path = os.path.join(root, r["dir"], "config.json")
    return open(path).read() if os.path.exists(path) else None


if __name__ == "__main__":
    sys.exit(main())
