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
# json_get FILE-CONTENT PY-EXPRESSION (d is the parsed document)
json_get() { python3 -c "import json,sys; d=json.load(sys.stdin); print($2)" <<<"$1"; }
finish() {
  echo "$PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ]
}
