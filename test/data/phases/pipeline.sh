#!/usr/bin/env bash
# A four-program chain on one text file, each program with its own CPU and memory needs:
# compress (bzip2, one core, a few MB), sort (GNU sort, up to two cores, memory growing with
# its input), index (mawk: the first line of each key, one core, memory growing with the keys),
# archive (bzip2 of the sorted file, one core, a few MB). Writes each program's start and end, seconds since the epoch,
# to LOG: the truth phase detection is tested against.
# Usage: pipeline.sh INPUT LOG
set -euo pipefail
in=$1
log=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mark() { echo "$1 $(date +%s.%N)" >>"$log"; }
: >"$log"
mark compress
bzip2 -9 -c "$in" >"$dir/a.bz2"
mark sort
bzcat "$dir/a.bz2" | sort -S 1G --parallel=2 -T "$dir" >"$dir/sorted"
mark index
mawk '{ if (!($1 in first)) first[$1] = NR } END { for (k in first) print k, first[k] }' \
  "$dir/sorted" >"$dir/index"
mark archive
bzip2 -9 -c "$dir/sorted" >"$dir/sorted.bz2"
mark end
