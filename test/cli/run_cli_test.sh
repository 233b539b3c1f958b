#!/usr/bin/env bash
# `rightsize run` on real processes: peak memory within 5% and CPU time within 10% of what the
# workloads report themselves (stress-ng and Python), a memory limit enforced by a cgroup and
# the OOM kill diagnosed with the memory series, a failing command diagnosed from its output,
# folded stacks that contain the workload's hot function, and the GPU path end to end through
# the fake libnvidia-ml.so (an Xid event, a process appearing on the GPU).
# Usage: run_cli_test.sh RIGHTSIZE TESTDIR SRCDIR HOT_LOOP FAKE_NVML
set -euo pipefail
source "$2/cli/lib.sh" "$@"
HOT_LOOP=$4
FAKE_NVML=$5
within() { # within GOT WANT PCT
  python3 -c "import sys; g, w, p = float('$1'), float('$2'), float('$3'); sys.exit(0 if abs(g - w) <= w * p / 100 else 1)"
}

# Peak memory: a process that holds 400 MiB, touched, and reports its own peak RSS.
cat >"$WORK/mem.py" <<'PY'
import resource, time
x = bytearray(400 * 1024 * 1024)
for i in range(0, len(x), 4096):
    x[i] = 1
time.sleep(1.5)
print("peak_kib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
PY
run_rs run --json -- python3 "$WORK/mem.py"
expect_eq "run exits as the command did" "$RC" 0
truth=$(( $(grep -o 'peak_kib [0-9]*' <<<"$OUT" | cut -d' ' -f2) * 1024 ))
peak=$(json_get "$(sed -n '/^{/,$p' <<<"$OUT")" 'd["usage"]["peak_memory_bytes"]')
if within "$peak" "$truth" 5; then pass "peak memory $peak within 5% of $truth"; else fail "peak $peak vs $truth"; fi
DOC=$(sed -n '/^{/,$p' <<<"$OUT")
expect_eq "state" "$(json_get "$DOC" 'd["job"]["outcome"]["state"]')" COMPLETED
for key in elapsed_s peak_memory_bytes mean_cpu_cores; do
  expect_eq "usage.$key is there" "$(json_get "$DOC" "d['usage']['$key'] is not None")" True
done

# CPU: two processes spinning for 2 s each, under GNU time, which reports their CPU time too.
cat >"$WORK/cpu.py" <<'PY'
import time
end = time.monotonic() + 2.0
while time.monotonic() < end:
    pass
PY
run_rs run --json -- /usr/bin/time -f "truth %U %S" sh -c "python3 $WORK/cpu.py & python3 $WORK/cpu.py; wait"
DOC=$(sed -n '/^{/,$p' <<<"$OUT")
truth=$(grep -o 'truth [0-9.]* [0-9.]*' <<<"$ERR" | awk '{print $2 + $3}')
got=$(json_get "$DOC" 'd["usage"]["cpu_time_s"]')
if within "$got" "$truth" 10; then pass "CPU time $got s within 10% of $truth s"; else fail "CPU $got vs $truth"; fi
cores=$(json_get "$DOC" 'd["usage"]["mean_cpu_cores"]')
elapsed=$(json_get "$DOC" 'd["usage"]["elapsed_s"]')
if within "$cores" "$(python3 -c "print($truth / $elapsed)")" 10; then pass "mean CPU cores $cores"; else fail "cores $cores"; fi

# Energy: the real /sys/class/powercap (absent on this machine: the document says so, and the CPU
# energy is null, not 0), then a fixture laid out like it (a RAPL package: read).
if [ ! -e /sys/class/powercap ]; then
  rapl=$(json_get "$DOC" 'd["rapl"]["status"]')
  cpu_j=$(json_get "$DOC" 'd["summary"]["energy"]["cpu_j"]')
  if [ "$rapl" = "RAPL absent: /sys/class/powercap does not exist" ] && [ "$cpu_j" = None ]; then
    pass "no RAPL here: '$rapl', cpu_j null"; else fail "RAPL '$rapl', cpu_j $cpu_j"; fi
  if grep -q "CPU unknown (RAPL absent: /sys/class/powercap does not exist)" <<<"$("$RS" run -- true 2>&1)"; then
    pass "text output says RAPL is absent"; else fail "text output does not say RAPL is absent"; fi
fi
mkdir -p "$WORK/powercap/intel-rapl:0"
echo package-0 >"$WORK/powercap/intel-rapl:0/name"
echo 5000000 >"$WORK/powercap/intel-rapl:0/energy_uj"
echo 262143328850 >"$WORK/powercap/intel-rapl:0/max_energy_range_uj"
run_rs run --json --powercap "$WORK/powercap" -- python3 "$WORK/cpu.py"
DOC=$(sed -n '/^{/,$p' <<<"$OUT")
rapl=$(json_get "$DOC" 'd["rapl"]["status"]')
cpu_j=$(json_get "$DOC" 'd["usage"]["cpu_energy_j"]')
# The fixture's counter does not move: the job measured 0 J, which is known (0.0), not null.
if [ "$rapl" = "RAPL: 1 package (intel-rapl:0)" ] && [ "$cpu_j" = 0.0 ]; then
  pass "RAPL fixture read: '$rapl', cpu_energy_j $cpu_j"; else fail "RAPL fixture '$rapl', $cpu_j"; fi

# stress-ng, when installed: its own report is the truth.
if command -v stress-ng >/dev/null; then
  run_rs run --json -- stress-ng --vm 1 --vm-bytes 300M --vm-keep --vm-populate -t 3 --metrics-brief
  DOC=$(sed -n '/^{/,$p' <<<"$OUT")
  peak=$(json_get "$DOC" 'd["usage"]["peak_memory_bytes"]')
  if [ "$peak" -ge $((300 * 1024 * 1024)) ] && [ "$peak" -le $((330 * 1024 * 1024)) ]; then
    pass "stress-ng --vm-bytes 300M: peak $peak"; else fail "stress-ng peak $peak"; fi
fi

# Storage I/O of a short process (it lives between two samples): 64 MiB written and synced.
if [ "$(df --output=fstype "$WORK" | tail -1)" != tmpfs ]; then
  run_rs run --json -- dd if=/dev/zero of="$WORK/io.bin" bs=1M count=64 conv=fsync status=none
  DOC=$(sed -n '/^{/,$p' <<<"$OUT")
  written=$(json_get "$DOC" 'd["usage"]["io_write_bytes"]')
  if [ "$written" -ge $((64 * 1024 * 1024)) ]; then pass "I/O written $written"; else fail "written $written"; fi
  rm -f "$WORK/io.bin"
fi

# A memory limit, enforced: the kernel kills the job, the diagnosis says why, with the trend.
cat >"$WORK/grow.py" <<'PY'
import time
chunks = []
while True:
    chunks.append(bytearray(10 * 1024 * 1024))  # 1.5 s to the limit: enough samples on a busy machine
    time.sleep(0.1)
PY
run_rs run --mem 150M --interval 0.2 --json -- python3 "$WORK/grow.py"
if [ "$RC" -eq 2 ] && grep -q "memory cgroup" <<<"$ERR"; then
  echo "skip: no memory cgroup here ($ERR)"
else
  DOC=$(sed -n '/^{/,$p' <<<"$OUT")
  expect_eq "killed over --mem" "$RC" 137
  expect_eq "state OUT_OF_MEMORY" "$(json_get "$DOC" 'd["job"]["outcome"]["state"]')" OUT_OF_MEMORY
  expect_eq "diagnosed host_oom" "$(json_get "$DOC" 'd["diagnosis"]["class"]')" host_oom
  expect_eq "the limit is a fact" "$(json_get "$DOC" 'd["diagnosis"]["facts"]["memory_limit_bytes"]')" \
    $((150 * 1024 * 1024))
  slope=$(json_get "$DOC" 'd["diagnosis"]["facts"].get("memory_slope_bytes_per_s", 0)')
  if [ "${slope%.*}" -gt $((10 * 1024 * 1024)) ]; then pass "memory slope $slope B/s before the kill"
  else fail "slope $slope"; fi
  expect_contains "the why tells a growing working set" "$(json_get "$DOC" 'd["diagnosis"]["why"]')" "grew steadily"
  expect_contains "the fix asks for more memory" "$(json_get "$DOC" 'd["diagnosis"]["fixes"][0]["text"]')" "--mem="
fi

# A failing command: diagnosed from what it printed.
run_rs run -- python3 -c "import rightsize_no_such_module"
expect_eq "exit code passed through" "$RC" 1
expect_contains "diagnosis printed" "$ERR" "what:  import_error"
run_rs run -- /nonexistent/program
expect_eq "a missing program exits 127" "$RC" 127

# Stacks: the hot function of a CPU-bound program.
run_rs run --stacks "$WORK/stacks.folded" -- "$HOT_LOOP" 2
if grep -q "no stacks" <<<"$ERR"; then
  echo "skip: stack sampling not permitted here: $ERR"
else
  expect_contains "folded stacks name the hot function" "$(cat "$WORK/stacks.folded")" \
    rightsize_test_hot_loop
  # A Python 3.11 program: its own functions, files and lines, outermost first (issue 28).
  run_rs run --json --stacks "$WORK/py.folded" -- /usr/bin/python3.11 "$2/agent/python_prog.py" 3
  expect_eq "a Python program under --stacks --json" "$RC" 0
  expect_eq "no stacks note for Python 3.11" "$(grep -c 'rightsize run: stacks:' <<<"$ERR")" 0
  expect_contains "its folded stacks name hot_loop under middle under outer with lines" \
    "$(cat "$WORK/py.folded")" \
    "python3.11;<module> (python_prog.py:26);outer (python_prog.py:23);middle (python_prog.py:16);hot_loop (python_prog.py:1"
fi

# The GPU path end to end through the fake NVML: the job's process appears on GPU 1 from the
# second sample, an Xid 79 arrives on that GPU.
cat >"$WORK/job.sh" <<SH
echo \$\$ > "$WORK/job.pid"
sleep 3
SH
cat >"$WORK/nvml.script" <<SCRIPT
gpu 0 uuid=GPU-aaaa name=NVIDIA H100 bus=00000000:3B:00.0 util=10 memutil=5 used=1073741824 total=85899345920 power=100000 sm=1980 mem=2619 temp=40 ecc=0
gpu 1 uuid=GPU-bbbb name=NVIDIA H100 bus=00000000:86:00.0 util=90 memutil=60 used=42949672960 total=85899345920 power=600000 sm=1980 mem=2619 temp=70 ecc=0
proc 1 pidfile=$WORK/job.pid used=42949672960 from_sample=2
xid 1 79 at_sample=3
SCRIPT
RIGHTSIZE_FAKE_NVML=$WORK/nvml.script run_rs run --nvml "$FAKE_NVML" --interval 0.5 --json -- bash "$WORK/job.sh"
DOC=$(sed -n '/^{/,$p' <<<"$OUT")
expect_eq "GPU available through the fake" "$(json_get "$DOC" 'd["gpu"]["available"]')" True
expect_eq "the job's own GPU memory" "$(json_get "$DOC" 'd["usage"]["peak_gpu_memory_bytes"]')" 42949672960
expect_eq "GPU utilisation of the job's GPU" "$(json_get "$DOC" 'round(d["usage"]["gpu_util_pct"])')" 90
expect_eq "the Xid event on the job's GPU" "$(json_get "$DOC" 'd["summary"]["gpu_events"][0]["xid"]')" 79
run_rs run --nvml /nonexistent/libnvidia-ml.so.1 --json -- true
DOC=$(sed -n '/^{/,$p' <<<"$OUT")
expect_eq "no driver: GPU off" "$(json_get "$DOC" 'd["gpu"]["available"]')" False
expect_contains "and says why" "$(json_get "$DOC" 'd["gpu"]["status"]')" "/nonexistent/libnvidia-ml.so.1"
# Phases: a job that sleeps on ~10 MB for 12 s, then builds and holds 300 MB for 12 s, has its
# first phase boundary near 12 s (building the bytes busies a core: a phase of its own), and the
# split frees memory in the first phase (docs/phases.md).
run_rs run --mem 1G --interval 1 --json --series -- python3 -c \
  'import time; time.sleep(12); x = b"x" * (300 << 20); time.sleep(12)'
DOC=$(sed -n '/^{/,$p' <<<"$OUT")
expect_eq "at least two phases" "$(json_get "$DOC" 'len(d["phases"]["phases"]) >= 2')" True
expect_eq "the boundary near 12 s" \
  "$(json_get "$DOC" '12 <= d["phases"]["phases"][1]["start_s"] <= 15')" True
expect_eq "the reservation is --mem" "$(json_get "$DOC" 'd["phases"]["split"]["reserved_memory_bytes"]')" 1073741824.0
expect_eq "memory freed by the split" \
  "$(json_get "$DOC" 'd["phases"]["split"]["freed_memory_byte_s"] > 11 * 700e6')" True
finish
