#!/bin/bash
# The program loads none of the libraries cmake/static_deps.cmake links statically: one loaded
# as a shared object as well would be a second copy (two protobuf descriptor pools), and every
# command would pay the loader for it again.
set -euo pipefail
program="$1"
names='lib(grpc\+\+|grpc|gpr|upb|address_sorting|cares|re2|protobuf|absl_[a-z0-9_]+|sqlite3|tree-sitter|yaml-cpp|snappy)\.so'
loaded="$(ldd "$program")"
if grep -E "$names" <<<"$loaded"; then
  echo "FAIL: $program loads the shared objects above; they are meant to be linked statically" >&2
  exit 1
fi
# And it still starts.
"$program" --version
