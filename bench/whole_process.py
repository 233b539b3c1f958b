#!/usr/bin/env python3
"""Times whole `rightsize` processes, start to exit, for one or more builds side by side.

Each round runs every command once with every build, the builds' order alternating from round
to round, so that a machine's drift weighs on all of them alike. Prints per command and build the
median and the 10th and 90th percentiles in milliseconds, and the load average at the end.

The commands: `--version` (start-up alone); `advise job.sh --json` and `predict job.sh --json` in
the 5,053-line project `build/bench/code_bench` writes to /tmp/rightsize_code_bench; and, with
--corpus-run, `predict job.sbatch --json` in one run folder of the changing-programs corpus.
The predict commands read the store --db names (e.g. the corpus ingested with `rightsize ingest
runs` and a `rightsize train`; docs/benchmarks.md has the commands).

Usage: whole_process.py --bin NAME=PATH [--bin NAME=PATH ...] --db STORE
                        [--project DIR] [--corpus-run DIR] [--runs N]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(p * (len(values) - 1) + 0.5))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", action="append", required=True, help="NAME=PATH of a build")
    parser.add_argument("--db", required=True, help="the store predict reads")
    parser.add_argument("--project", default="/tmp/rightsize_code_bench")
    parser.add_argument("--corpus-run", help="a run folder of the changing-programs corpus")
    parser.add_argument("--runs", type=int, default=31)
    args = parser.parse_args()

    builds = []
    for spec in args.bin:
        name, sep, path = spec.partition("=")
        if not sep or not os.access(path, os.X_OK):
            sys.exit(f"--bin {spec}: expected NAME=PATH of an executable")
        builds.append((name, os.path.abspath(path)))
    commands = [("version", ["--version"], "/tmp"),
                ("advise", ["advise", "job.sh", "--json"], args.project),
                ("predict", ["predict", "job.sh", "--json"], args.project)]
    if args.corpus_run:
        commands.append(("predict_corpus", ["predict", "job.sbatch", "--json"], args.corpus_run))
    env = dict(os.environ, RIGHTSIZE_DB=args.db)

    times = {(b, c[0]): [] for b, _ in builds for c in commands}
    for i in range(args.runs):
        for name, argv, cwd in commands:
            for build, path in (builds if i % 2 == 0 else builds[::-1]):
                start = time.perf_counter()
                done = subprocess.run([path] + argv, cwd=cwd, env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                times[(build, name)].append((time.perf_counter() - start) * 1000)
                if done.returncode != 0:
                    sys.exit(f"{build} {' '.join(argv)} in {cwd}: exit {done.returncode}: "
                             f"{done.stderr.decode(errors='replace')[-500:]}")
    for name, _, _ in commands:
        for build, _ in builds:
            v = times[(build, name)]
            print(f"{name:15s} {build:10s} median {statistics.median(v):7.1f} ms  "
                  f"p10 {percentile(v, 0.1):7.1f}  p90 {percentile(v, 0.9):7.1f}")
    with open("/proc/loadavg") as f:
        print("load average", f.read().strip())


if __name__ == "__main__":
    main()
