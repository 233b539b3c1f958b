#!/usr/bin/env bash
# cluster.sh - a real one-node SLURM 22.05 test cluster for rightsize's integration tests.
#
# Debian 12, run as root, no systemd needed: installs the packages that are missing
# (munge, mariadb-server, slurm-wlm, slurmdbd), writes the configs and starts munged,
# mariadbd, slurmdbd, slurmctld and slurmd as plain background processes.
# Cluster "rstest", partition "debug", account "testacct" (root's default account).
#
#   cluster.sh up       install if needed, configure, start what is not running, wait for node idle
#   cluster.sh down     stop exactly the daemons that `up` started (PIDs recorded in $RS_SLURM_DIR)
#   cluster.sh status   show each daemon and sinfo
#
# Environment:
#   SLURM_CGROUP=v1          proctrack/cgroup + task/cgroup on cgroup v1 (kernel OOM kill ->
#                            sacct OUT_OF_MEMORY). Default: proctrack/linuxproc + task/none +
#                            JobAcctGatherParams=OverMemoryKill (1 s polling kill -> FAILED 0:9).
#   RS_JOB_SUBMIT_LUA=FILE   copy FILE to /etc/slurm/job_submit.lua and set JobSubmitPlugins=lua.
#                            Unset: no JobSubmitPlugins line.
#   RS_SLURM_DIR             state dir: our pidfiles + daemon stdout (default /var/tmp/rightsize-slurm)
#   RS_SLURM_OWNER=PID       the run that owns the cluster (default: the process that runs this
#                            script, i.e. the test script that calls `up` and later `down`)
#
# `up` is idempotent: running daemons are left alone; if slurm.conf/cgroup.conf changed while
# slurmctld/slurmd (ours) run, those two are restarted. Every step prints elapsed time.
#
# One run at a time (tests take `flock /tmp/rightsize-slurm.lock`). `up` refuses to drive SLURM
# daemons another run still owns (its owner process, recorded in $RS_SLURM_DIR/owner with its
# start time, is alive) or daemons cluster.sh did not start at all: it never rewrites the
# slurm.conf of daemons under someone else's jobs. Daemons whose run was interrupted (its owner
# is gone) are taken over: that run's jobs are cancelled and a node it left drained or down is
# resumed, so the next `up` does not time out waiting for the node. `down` leaves the daemons
# of another live run alone.
# Pitfalls handled (see /work/shared/reference/slurm/NOTES.md): policy-rc.d blocks postinst
# service starts, /run/* dirs do not exist without systemd, fresh slurmdbd gives root the
# default account "root", node topology must match `slurmd -C`, MailProg must exist.
set -euo pipefail

STATE=${RS_SLURM_DIR:-/var/tmp/rightsize-slurm}
CGROUP_MODE=${SLURM_CGROUP:-none}
CLUSTER=rstest PARTITION=debug ACCOUNT=testacct DBPASS=rstest-slurmdb
PKGS="munge mariadb-server slurm-wlm slurmdbd"
DAEMONS="munged mariadbd slurmdbd slurmctld slurmd"   # start order
NODE=$(hostname -s)
T0=$(date +%s%N)
# "PID STARTTIME" of a live process (its start time tells a reused pid apart); fails when gone.
proc_id() {
  local s PID_ARG=$1; s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  s=${s##*) }
  # shellcheck disable=SC2086
  set -- $s   # field 3 (state) is $1: field 22 (start time) is ${20}
  [ "$1" != Z ] || return 1
  echo "$PID_ARG ${20}"
}
PPID_OR_OWNER=${RS_SLURM_OWNER:-$PPID}
ME=$(proc_id "$PPID_OR_OWNER" || echo "$PPID_OR_OWNER 0")

log() { local ms=$((($(date +%s%N) - T0) / 1000000)); printf '[cluster.sh %3d.%03ds] %s\n' $((ms / 1000)) $((ms % 1000)) "$*"; }
die() { log "ERROR: $*" >&2; exit 1; }
wait_for() { # wait_for SECONDS WHAT CMD...: poll CMD every 0.2 s
  local n=$(($1 * 5)) what=$2; shift 2
  while ! "$@" >/dev/null 2>&1; do
    n=$((n - 1)); [ "$n" -gt 0 ] || die "timeout waiting for $what"; sleep 0.2
  done
}
pidfile_of() { # the pidfile each daemon writes itself
  case $1 in
    munged) echo /run/munge/munged.pid ;; mariadbd) echo /run/mysqld/mysqld.pid ;;
    *) echo "/run/slurm/$1.pid" ;;
  esac
}
# PID from FILE if that process is alive and really is daemon NAME (guards against PID reuse)
live_pid() { # live_pid NAME FILE
  local p; [ -s "$2" ] || return 1; p=$(cat "$2")
  [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$1" ] && echo "$p"
}

# alive and not a zombie (the daemons are reparented to PID 1, which may reap them late)
running() { [ -r "/proc/$1/stat" ] && [ "$(cut -d' ' -f3 "/proc/$1/stat")" != Z ]; }

start_daemon() { # start_daemon NAME CMD...: detached (setsid), foreground mode, own pidfile
  local name=$1 pf p; pf=$(pidfile_of "$1"); shift
  if p=$(live_pid "$name" "$pf"); then
    if [ "$(cat "$STATE/$name.pid" 2>/dev/null)" = "$p" ]; then log "$name already running (pid $p)"
    else log "$name already running (pid $p, not started by us: down will leave it)"; fi
    return 0
  fi
  rm -f "$pf"
  setsid "$@" </dev/null >"$STATE/$name.out" 2>&1 &
  wait_for 60 "$name to write $pf" live_pid "$name" "$pf"
  live_pid "$name" "$pf" >"$STATE/$name.pid"
  log "$name started (pid $(cat "$STATE/$name.pid"), output $STATE/$name.out)"
}

stop_daemon() { # stop_daemon NAME: only if we started it (our pidfile) and it still is NAME
  local name=$1 p
  if p=$(live_pid "$name" "$STATE/$name.pid"); then
    kill -TERM "$p"
    for _ in $(seq 300); do running "$p" || break; sleep 0.1; done
    if running "$p"; then kill -KILL "$p"; log "$name ($p) did not stop in 30 s: SIGKILL"
    else log "stopped $name ($p)"; fi
  fi
  rm -f "$STATE/$name.pid"
}

install_pkgs() {
  local p missing=""
  for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
  done
  if [ -z "$missing" ]; then log "packages present: $PKGS"; return; fi
  log "installing:$missing (log $STATE/apt.log)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq >"$STATE/apt.log" 2>&1
  # policy-rc.d denies the postinst service starts (and there is no systemd): we start them below
  # shellcheck disable=SC2086
  apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends $missing >>"$STATE/apt.log" 2>&1 \
    || die "apt-get install failed, see $STATE/apt.log"
  log "packages installed"
}

make_dirs() { # nothing creates /run/* without systemd-tmpfiles
  install -d -o munge -g munge -m 0755 /run/munge
  install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
  install -d -o mysql -g mysql -m 0755 /run/mysqld
  install -d -o slurm -g slurm -m 0755 /run/slurm /var/log/slurm /var/lib/slurm \
    /var/lib/slurm/slurmctld /var/lib/slurm/slurmd
}

CHANGED=0
write_if_changed() { # write_if_changed FILE MODE < content; sets CHANGED=1 when the file changed
  local tmp; tmp=$(mktemp)
  cat >"$tmp"
  if cmp -s "$tmp" "$1"; then rm -f "$tmp"; return; fi
  install -m "$2" "$tmp" "$1"; rm -f "$tmp"; CHANGED=1; log "wrote $1"
}

start_munge_mariadb() {
  if [ ! -s /etc/munge/munge.key ]; then   # Debian's postinst normally creates it
    mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key; chmod 0600 /etc/munge/munge.key
  fi
  start_daemon munged setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged -F
  wait_for 20 "munge" sh -c 'munge -n | unmunge'

  # slurmdbd warns about InnoDB values below these
  write_if_changed /etc/mysql/mariadb.conf.d/99-rightsize-slurm.cnf 0644 <<'EOF'
[mysqld]
innodb_buffer_pool_size=1024M
innodb_log_file_size=64M
innodb_lock_wait_timeout=900
EOF
  [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
  start_daemon mariadbd /usr/sbin/mariadbd --user=mysql --pid-file=/run/mysqld/mysqld.pid
  wait_for 60 "mariadb" mariadb-admin ping
  mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
    CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DBPASS';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
}

write_slurm_configs() {
  CHANGED=0
  write_if_changed /etc/slurm/slurmdbd.conf 0600 <<EOF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=slurm
LogFile=/var/log/slurm/slurmdbd.log
PidFile=/run/slurm/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$DBPASS
StorageLoc=slurm_acct_db
EOF
  chown slurm:slurm /etc/slurm/slurmdbd.conf
  local dbd_changed=$CHANGED; CHANGED=0

  # this machine's real topology (slurmd complains otherwise); keep 1 GiB for OS + daemons
  local hw mem
  hw=$(slurmd -C | head -1)
  val() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$hw"; }   # val KEY: number from `slurmd -C`
  mem=$(($(val RealMemory) - 1024))

  local proctrack=proctrack/linuxproc task=task/none gather=jobacct_gather/linux gparams=OverMemoryKill
  if [ "$CGROUP_MODE" = v1 ]; then
    proctrack=proctrack/cgroup task=task/cgroup gather=jobacct_gather/cgroup gparams=NoOverMemoryKill
    write_if_changed /etc/slurm/cgroup.conf 0644 <<'EOF'
CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
ConstrainCores=yes
ConstrainRAMSpace=yes
ConstrainSwapSpace=no
EOF
  elif [ -e /etc/slurm/cgroup.conf ]; then
    rm -f /etc/slurm/cgroup.conf; CHANGED=1
  fi

  local submit=""
  if [ -n "${RS_JOB_SUBMIT_LUA:-}" ]; then
    [ -f "$RS_JOB_SUBMIT_LUA" ] || die "RS_JOB_SUBMIT_LUA=$RS_JOB_SUBMIT_LUA is not a file"
    write_if_changed /etc/slurm/job_submit.lua 0644 <"$RS_JOB_SUBMIT_LUA"
    submit="JobSubmitPlugins=lua"
  fi

  write_if_changed /etc/slurm/slurm.conf 0644 <<EOF
# written by rightsize test/integration/slurm/cluster.sh (SLURM_CGROUP=$CGROUP_MODE)
ClusterName=$CLUSTER
SlurmctldHost=$NODE
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
MailProg=/bin/true
MpiDefault=none
ReturnToService=2
ProctrackType=$proctrack
TaskPlugin=$task
# Contain: every job gets an .extern step
PrologFlags=Contain
JobAcctGatherType=$gather
JobAcctGatherFrequency=1
JobAcctGatherParams=$gparams
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStorageEnforce=associations,limits
AccountingStoreFlags=job_comment
JobCompType=jobcomp/none
$submit
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=512
MaxMemPerNode=$mem
OverTimeLimit=0
KillWait=5
InactiveLimit=0
MinJobAge=300
Waittime=0
NodeName=$NODE CPUs=$(val CPUs) Sockets=$(val SocketsPerBoard) CoresPerSocket=$(val CoresPerSocket) ThreadsPerCore=$(val ThreadsPerCore) RealMemory=$mem State=UNKNOWN
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  SLURM_CHANGED=$CHANGED
  if [ "$dbd_changed" = 1 ] && [ -s "$STATE/slurmdbd.pid" ]; then stop_daemon slurmdbd; fi
}

start_slurm() {
  start_daemon slurmdbd /usr/sbin/slurmdbd -D
  wait_for 60 "slurmdbd" sacctmgr -n show cluster
  sacctmgr -n -P show cluster format=cluster | grep -qx "$CLUSTER" || sacctmgr -i add cluster "$CLUSTER" >/dev/null
  sacctmgr -n -P show account format=account | grep -qx "$ACCOUNT" ||
    sacctmgr -i add account "$ACCOUNT" Description=rightsize-tests Organization=rightsize >/dev/null
  # a fresh slurmdbd already knows root (default account "root"): add the association explicitly
  sacctmgr -n -P show assoc where user=root account="$ACCOUNT" format=user | grep -q . ||
    sacctmgr -i add user root Account="$ACCOUNT" >/dev/null
  sacctmgr -n -P show user root format=defaultaccount | grep -qx "$ACCOUNT" ||
    sacctmgr -i modify user where name=root set DefaultAccount="$ACCOUNT" >/dev/null
  log "slurmdbd ready: cluster $CLUSTER, account $ACCOUNT, user root"

  if [ "$SLURM_CHANGED" = 1 ]; then   # config changed under running daemons: restart ours
    for d in slurmd slurmctld; do if [ -s "$STATE/$d.pid" ]; then stop_daemon $d; fi; done
    rm_slurm_cgroups
  fi
  start_daemon slurmctld /usr/sbin/slurmctld -D
  wait_for 60 "slurmctld" sh -c 'scontrol ping | grep -q UP'
  start_daemon slurmd /usr/sbin/slurmd -D
  recover_node
  wait_for 90 "node $NODE idle" node_idle
  log "up: $(sinfo -h -o 'partition=%P avail=%a nodes=%D state=%t cpus=%c mem=%mM')"
}

# The run recorded as owning the daemons, if it is alive and is not this one ("" otherwise).
other_owner() {
  local owner; owner=$(cat "$STATE/owner" 2>/dev/null || true)
  [ -n "$owner" ] && [ "$owner" != "$ME" ] || return 0
  [ "$(proc_id "${owner%% *}" 2>/dev/null)" = "$owner" ] && echo "${owner%% *}"
  return 0
}
describe_pid() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | cut -c1-160; }

# Before touching the SLURM daemons: refuse those of another live run and those not ours.
claim_cluster() {
  local other d p
  other=$(other_owner)
  if [ -n "$other" ]; then
    die "the SLURM daemons belong to another run (pid $other: $(describe_pid "$other")); refusing to drive them or rewrite their slurm.conf. Wait for it (tests hold flock /tmp/rightsize-slurm.lock) or stop it"
  fi
  for d in slurmdbd slurmctld slurmd; do
    if p=$(live_pid "$d" "$(pidfile_of "$d")") && [ "$(cat "$STATE/$d.pid" 2>/dev/null)" != "$p" ]; then
      die "$d (pid $p) is running but was not started by cluster.sh (state dir $STATE); refusing to drive it. Stop it, or set RS_SLURM_DIR to the state dir of the run that started it"
    fi
  done
  if [ -s "$STATE/owner" ] && [ "$(cat "$STATE/owner")" != "$ME" ]; then
    TAKEN_OVER=1
    log "the run that owned the cluster (pid $(cut -d' ' -f1 "$STATE/owner")) is gone: taking it over"
  fi
  echo "$ME" >"$STATE/owner"
}
TAKEN_OVER=0
RESUMED_AT=-10
exec 9>&1

# An interrupted run leaves its jobs behind ("launch failed requeued held") and the node
# drained or down: cancel the jobs of a run taken over, resume the node.
recover_node() {
  if [ "$TAKEN_OVER" = 1 ]; then
    local jobs; jobs=$(squeue -h -o %i 2>/dev/null | tr '\n' ' ')
    if [ -n "${jobs// /}" ]; then
      log "cancelling the jobs the interrupted run left: $jobs"
      # shellcheck disable=SC2086
      scancel $jobs 2>/dev/null || true
    fi
  fi
}
node_idle() { # true when idle; resumes a node left drained or down (not one still draining jobs)
  local raw st; raw=$(sinfo -h -n "$NODE" -o %t 2>/dev/null)
  st=$(tr -d '*~#!%$@^-' <<<"$raw")
  case $st in
    # "idle*": slurmctld has not heard from slurmd yet (just resumed or restarted): not ready.
    idle) [ "$raw" = idle ] && return 0 ;;
    drain|drained|down|fail)
      if [ $((SECONDS - RESUMED_AT)) -ge 5 ]; then   # wait_for hides our output: fd 9 is stdout
        log "node $NODE is $st ($(sinfo -h -n "$NODE" -o %E 2>/dev/null)): resuming it" >&9
        scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true
        RESUMED_AT=$SECONDS
      fi ;;
  esac
  return 1
}

rm_slurm_cgroups() { # cgroup-v1 mode leaves empty slurm_<node> trees behind
  local c
  for c in /sys/fs/cgroup/*/slurm_"$NODE"; do
    if [ -d "$c" ]; then find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null || true; fi
  done
}

cmd_up() {
  mkdir -p "$STATE"
  claim_cluster
  install_pkgs
  make_dirs
  start_munge_mariadb
  write_slurm_configs
  start_slurm
  log "cluster $CLUSTER up (SLURM_CGROUP=$CGROUP_MODE, job_submit lua: ${RS_JOB_SUBMIT_LUA:-none})"
}

cmd_down() {
  local d other
  other=$(other_owner)
  if [ -n "$other" ]; then
    log "left running: the daemons belong to another run (pid $other: $(describe_pid "$other"))"
    return 0
  fi
  for d in slurmd slurmctld slurmdbd mariadbd munged; do stop_daemon "$d"; done
  rm -f "$STATE/owner"
  rm_slurm_cgroups
  if pgrep -x slurmstepd >/dev/null; then log "warning: slurmstepd processes remain (jobs were running)"; fi
  log "down"
}

cmd_status() {
  local d p pf
  for d in $DAEMONS; do
    pf=$(pidfile_of "$d")
    if p=$(live_pid "$d" "$pf"); then
      if [ "$(cat "$STATE/$d.pid" 2>/dev/null)" = "$p" ]; then echo "$d: running, pid $p (ours)"
      else echo "$d: running, pid $p (not started by cluster.sh)"; fi
    else echo "$d: stopped"; fi
  done
  if live_pid slurmctld /run/slurm/slurmctld.pid >/dev/null; then sinfo || true; fi
}

case ${1:-} in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  *) echo "usage: $0 up|down|status   (env: SLURM_CGROUP=v1, RS_JOB_SUBMIT_LUA=file.lua)" >&2; exit 2 ;;
esac
