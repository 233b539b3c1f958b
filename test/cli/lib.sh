# Shared helpers for the whole-program tests. Usage: source lib.sh RIGHTSIZE TESTDIR SRCDIR
RS=$1
TESTDIR=$2
SRCDIR=$3
WORK=$(mktemp -d /tmp/rightsize-cli-test.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export RIGHTSIZE_DB=$WORK/store.db
PASSED=0
FAILED=0

pass() { PASSED=$((PASSED + 1)); echo "ok: $*"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL: $*"; }
# expect_eq WHAT GOT WANT
expect_eq() { if [ "$2" == "$3" ]; then pass "$1"; else fail "$1: got '$2', want '$3'"; fi; }
# expect_contains WHAT HAYSTACK NEEDLE
expect_contains() {
  if grep -qF -- "$3" <<<"$2"; then pass "$1"; else fail "$1: '$3' not in: $(head -c 600 <<<"$2")"; fi
}
# run_rs: runs rightsize, keeping stdout in $OUT, stderr in $ERR, exit code in $RC.
run_rs() {
  set +e
  "$RS" "$@" >"$WORK/out" 2>"$WORK/err"
  RC=$?
  set -e
  OUT=$(cat "$WORK/out")
  ERR=$(cat "$WORK/err")
}
# listening_port FILE: the port a server printed as "listening on 127.0.0.1:PORT" into FILE,
# waiting up to 10 s for it; empty when it did not start.
listening_port() {
  local port=""
  for _ in $(seq 1 100); do
    port=$(grep -o 'listening on 127.0.0.1:[0-9]*' "$1" | cut -d: -f2 || true)
    [ -n "$port" ] && break
    sleep 0.1
  done
  echo "$port"
}
# json_get FILE-CONTENT PY-EXPRESSION (d is the parsed document)
json_get() { python3 -c "import json,sys; d=json.load(sys.stdin); print($2)" <<<"$1"; }
finish() {
  echo "$PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ]
}
