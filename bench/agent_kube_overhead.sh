#!/usr/bin/env bash
# The DaemonSet agent's own cost (issue 24's target: at most 0.5 % of one core): 50 pods of one
# container each with 10 processes (500), in real cgroup v1 groups laid out as the kubelet's
# cgroupfs driver lays them out (kubepods/{burstable,besteffort}/pod<UID>/<container id>, with a
# sandbox container per pod, as containerd makes), named by a fake kubelet (/pods served from a
# file by python3's http.server on the read-only port's scheme). `rightsize agent --kubernetes
# --interval 1` runs for DURATION seconds after a 40 s warm-up (the sandboxes are dropped after 30 s); reports its CPU time per wall
# second (from /proc/PID/stat) and its RSS. Root on a cgroup v1 machine.
# Usage: bench/agent_kube_overhead.sh RIGHTSIZE [DURATION]
set -euo pipefail
RS=$1
DURATION=${2:-60}
WORK=$(mktemp -d)  # removed on exit
CG=/sys/fs/cgroup
pids=()
groups=()
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true  # a group is removable once its processes are reaped
  for ((i = ${#groups[@]} - 1; i >= 0; i--)); do rmdir "${groups[$i]}" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
mk() {  # mk REL: the group under every controller, parents first
  for c in memory cpu cpuacct pids; do
    local p="$CG/$c"
    IFS=/ read -ra parts <<<"${1#/}"
    for part in "${parts[@]}"; do
      p="$p/$part"
      if [[ ! -d $p ]]; then mkdir "$p"; groups+=("$p"); fi
    done
  done
}
join() {  # join REL PID
  for c in memory cpu cpuacct pids; do echo "$2" >"$CG/$c$1/cgroup.procs"; done
}
items=()
for n in $(seq 1 50); do
  uid=$(printf '%08x-0000-4000-8000-%012x' "$n" "$n")
  cid=$(printf '%064x' $((n * 1000 + 1)))
  sandbox=$(printf '%064x' $((n * 1000 + 2)))
  qos=$([[ $((n % 2)) == 0 ]] && echo burstable || echo besteffort)
  pod=/kubepods/$qos/pod$uid
  mk "$pod/$cid"
  mk "$pod/$sandbox"
  sleep 100000 &  # killed on exit: a sleep that ran out under a slow set-up made fewer processes
  pids+=($!)
  join "$pod/$sandbox" $!
  for _ in $(seq 1 10); do
    sleep 100000 &
    pids+=($!)
    join "$pod/$cid" $!
  done
  items+=("{\"metadata\":{\"name\":\"bench-$n\",\"namespace\":\"bench\",\"uid\":\"$uid\",\"ownerReferences\":[{\"kind\":\"Job\",\"name\":\"bench\",\"controller\":true}]},\"spec\":{\"containers\":[{\"name\":\"main\",\"image\":\"busybox:1.36\",\"command\":[\"sleep\"],\"resources\":{\"limits\":{\"memory\":\"64Mi\"}}}]},\"status\":{\"qosClass\":\"Burstable\",\"containerStatuses\":[{\"name\":\"main\",\"containerID\":\"containerd://$cid\",\"restartCount\":0,\"state\":{\"running\":{}}}]}}")
done
mkdir -p "$WORK/kubelet"
(IFS=,; echo "{\"kind\":\"PodList\",\"items\":[${items[*]}]}") >"$WORK/kubelet/pods"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
/usr/bin/python3 -m http.server "$port" --bind 127.0.0.1 --directory "$WORK/kubelet" \
  >/dev/null 2>&1 &
pids+=($!)
sleep 1
"$RS" --db "$WORK/a.db" agent --kubernetes --interval 1 --listen 127.0.0.1:0 \
  --kubelet-url "http://127.0.0.1:$port" --kubelet-token-file "$WORK/none" \
  --pod-resources-socket "$WORK/none.sock" 2>"$WORK/err" &
agent=$!
pids+=($agent)
sleep 40  # past the sandboxes' kUnnamedGiveUpS: the steady state
ticks() { awk '{print $14 + $15}' "/proc/$agent/stat"; }
t0=$(ticks)
s0=$(date +%s.%N)
sleep "$DURATION"
t1=$(ticks)
s1=$(date +%s.%N)
rss=$(awk '/VmRSS/{print $2}' "/proc/$agent/status")
mport=$(grep -o '/metrics on 127.0.0.1:[0-9]*' "$WORK/err" | cut -d: -f2)
metrics=$(/usr/bin/python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$mport/metrics').read().decode())")
jobs=$(awk '/^rightsize_agent_jobs /{print $2}' <<<"$metrics")
procs=$(awk '/^rightsize_job_processes\{/{s += $2} END {print s}' <<<"$metrics")
hz=$(getconf CLK_TCK)
/usr/bin/python3 - "$t0" "$t1" "$s0" "$s1" "$hz" "$rss" "$jobs" "$procs" <<'PY'
import sys
t0, t1, s0, s1, hz, rss, jobs, procs = map(float, sys.argv[1:])
cpu = (t1 - t0) / hz
wall = s1 - s0
print(f"agent --kubernetes: {int(jobs)} containers watched, {int(procs)} processes, {wall:.0f} s: "
      f"CPU {cpu:.2f} s = {100 * cpu / wall:.2f}% of one core, RSS {rss / 1024:.1f} MiB")
PY
