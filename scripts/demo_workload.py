#!/usr/bin/env python3
"""One of the demo's live jobs (scripts/demo.sh): a short real program that uses CPU and memory
in its own way, for `rightsize agent` to watch. The agent finds it as a SLURM job by its
environment (SLURM_JOB_ID and friends, set by demo.sh); nothing here talks to rightsize.

Usage: demo_workload.py KIND SECONDS
  crunch   one busy core (pure Python arithmetic), little memory
  grow     memory growing to about 300 MB, half a core
  idle     mostly asleep: what a forgotten interactive job looks like
  fail     works, holds memory, then dies with MemoryError (exit status 1)
"""
import sys
import time


def crunch_numbers(deadline):
    total = 0
    while time.time() < deadline:
        for i in range(200_000):
            total += (i * i) % 7
    return total


def grow_memory(deadline, start):
    chunks = []
    span = max(deadline - start, 1.0)
    while time.time() < deadline:
        want = int(300 * min(1.0, (time.time() - start) / (0.7 * span)))
        while len(chunks) < want:
            chunks.append(bytearray(1 << 20))  # 1 MiB, touched by bytearray's zeroing
        crunch_numbers(time.time() + 0.25)
        time.sleep(0.25)
    return len(chunks)


def load_batches(deadline):
    held = [bytearray(150 << 20)]
    crunch_numbers(deadline)
    raise MemoryError(f"could not allocate batch {len(held) + 1} (demo: the job fails here)")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("crunch", "grow", "idle", "fail"):
        print(__doc__, file=sys.stderr)
        return 2
    kind, seconds = sys.argv[1], float(sys.argv[2])
    start = time.time()
    deadline = start + seconds
    if kind == "crunch":
        crunch_numbers(deadline)
    elif kind == "grow":
        grow_memory(deadline, start)
    elif kind == "idle":
        while time.time() < deadline:
            time.sleep(1)
    else:
        load_batches(deadline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
