#!/usr/bin/env bash
# A component sees only its own headers and those of the components it links: a core source
# that includes store/store.h must fail to compile, while the same source without that include
# compiles. usage: wrong_way_include.sh CMAKE BUILD_DIR
set -uo pipefail
CMAKE=$1
BUILD=$2
fail=0
if ! out=$("$CMAKE" --build "$BUILD" --target right_way_include_probe 2>&1); then
  echo "FAIL: the control probe (core including core/job.h) does not compile:"
  echo "$out" | tail -20
  fail=1
fi
if out=$("$CMAKE" --build "$BUILD" --target wrong_way_include_probe 2>&1); then
  echo "FAIL: core_includes_store.cc compiled: core can see the store's headers"
  fail=1
elif ! grep -q 'store/store.h: No such file or directory' <<<"$out"; then
  echo "FAIL: the wrong-way probe failed for another reason than the include:"
  echo "$out" | tail -20
  fail=1
fi
if [ "$fail" -eq 0 ]; then
  echo "ok: core cannot include store/store.h; the control probe compiles"
fi
exit "$fail"
