#!/usr/bin/env bash
# cluster.sh's ownership of the test cluster (issue 28): `up` while another run's daemons are up
# refuses instead of rewriting their slurm.conf; daemons it did not start are refused too; after
# an interrupted run (its owner gone, the node left drained) the next `up` takes the cluster
# over, resumes the node and comes up idle.
# Usage: cluster_sh_test.sh RIGHTSIZE TESTDIR SRCDIR   (as root, holding /tmp/rightsize-slurm.lock)
set -euo pipefail
source "$2/cli/lib.sh" "$@"
CLUSTER_SH=$TESTDIR/integration/slurm/cluster.sh
STATE=${RS_SLURM_DIR:-/var/tmp/rightsize-slurm}
NODE=$(hostname -s)
other=""
trap 'kill $other 2>/dev/null || true; bash "$CLUSTER_SH" down >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

bash "$CLUSTER_SH" up >"$WORK/up1" 2>&1 || { cat "$WORK/up1"; exit 1; }
pass "up"
conf=$(md5sum /etc/slurm/slurm.conf)

# Another run, still alive, calls `up` with another configuration: refused, nothing rewritten.
sleep 300 &
other=$!
set +e
RS_SLURM_OWNER=$other SLURM_CGROUP=v1 bash "$CLUSTER_SH" up >"$WORK/up2" 2>&1
rc=$?
set -e
expect_eq "up from another run is refused" "$rc" 1
expect_contains "and says whose they are" "$(cat "$WORK/up2")" "belong to another run (pid $$"
expect_eq "their slurm.conf is untouched" "$(md5sum /etc/slurm/slurm.conf)" "$conf"
RS_SLURM_OWNER=$other bash "$CLUSTER_SH" down >"$WORK/down2" 2>&1
expect_contains "down from another run leaves them" "$(cat "$WORK/down2")" "left running"
expect_contains "slurmctld still answers" "$(scontrol ping 2>&1)" "UP"

# Daemons cluster.sh did not start (no pidfile of ours): refused.
mv "$STATE/slurmctld.pid" "$WORK/slurmctld.pid"
set +e
bash "$CLUSTER_SH" up >"$WORK/up3" 2>&1
rc=$?
set -e
mv "$WORK/slurmctld.pid" "$STATE/slurmctld.pid"
expect_eq "foreign daemons are refused" "$rc" 1
expect_contains "and named" "$(cat "$WORK/up3")" "was not started by cluster.sh"

# An interrupted run: its owner is gone and it left the node drained.
scontrol update nodename="$NODE" state=drain reason=rs-interrupted-run
kill $other
wait $other 2>/dev/null || true
echo "$other 1" >"$STATE/owner"
expect_contains "the node is drained" "$(sinfo -h -n "$NODE" -o %t)" "drain"
bash "$CLUSTER_SH" up >"$WORK/up4" 2>&1 || { cat "$WORK/up4"; fail "up after an interrupted run"; }
expect_contains "the cluster is taken over" "$(cat "$WORK/up4")" "taking it over"
expect_contains "the node is resumed" "$(cat "$WORK/up4")" "resuming it"
expect_eq "and idle" "$(sinfo -h -n "$NODE" -o %t)" idle
finish
