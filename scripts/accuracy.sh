#!/usr/bin/env bash
# The accuracy run behind `make accuracy`: replay every public trace and usage file with
# `rightsize eval`, keep each rightsize.eval/v1 document under build/accuracy/, and render
# docs/accuracy.md from them (scripts/accuracy_table.py).
#
# Usage: scripts/accuracy.sh [TRACES_DIR]
#   TRACES_DIR  folder searched (with its subfolders) for SWF traces (*.swf, *.swf.gz);
#               default ../shared/data/traces if it exists, else data/traces.
# Environment: RS (the binary, default build/rightsize), OUT (default build/accuracy),
#              DOC (default docs/accuracy.md), PODS (per-pod GPU memory for `eval pods`,
#              default ../shared/data/usage/alibaba-genai-2026/pod_gpu_memory_used_bytes_anon.csv.gz
#              if it exists; the section is left out without it).
#
# Settings are fixed before looking at any result and are the same for every dataset of a kind:
#   traces      --retrain-every 7d  (the eval default)
#   usage data  --retrain-every 1d  (these files span days to months, not years)
#   all         --test-fraction 0.5 (the eval default)
#               --correct-every 1h  (the eval default: the risk correction moves as an hourly
#                                    `train` moves it)
set -euo pipefail
cd "$(dirname "$0")/.."

RS=${RS:-build/rightsize}
OUT=${OUT:-build/accuracy}
DOC=${DOC:-docs/accuracy.md}
TRACE_RETRAIN=7d
USAGE_RETRAIN=1d
TEST_FRACTION=0.5

if [[ $# -ge 1 ]]; then
  TRACES=$1
elif [[ -d ../shared/data/traces ]]; then
  TRACES=../shared/data/traces
else
  TRACES=data/traces
fi

if [[ ! -x "$RS" ]]; then
  echo "accuracy.sh: error: no rightsize binary at $RS; build it first (make build)," \
    "or run make accuracy, or set RS=path/to/rightsize" >&2
  exit 1
fi
if [[ ! -d "$TRACES" ]]; then
  echo "accuracy.sh: error: traces folder $TRACES does not exist" >&2
  exit 1
fi
command -v python3 >/dev/null || { echo "accuracy.sh: error: python3 is needed" >&2; exit 1; }

rm -rf "$OUT"
mkdir -p "$OUT"
# Every replay runs the same binary, even if the tree is rebuilt while this script runs.
cp "$RS" "$OUT/rightsize"
RS=$OUT/rightsize
MANIFEST=$OUT/manifest.tsv
printf 'name\tkind\tsource\tcluster\tformat\tretrain\tjson\tstatus\tseconds\tmessage\n' >"$MANIFEST"
START=$(date +%s.%N)

now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$@"; }
# The last line rightsize wrote to stderr, without its "rightsize: " prefix: why a step failed.
last_error() { tail -n 1 "$1" | sed 's/^rightsize: //' | tr '\t' ' '; }

# run_eval NAME KIND SOURCE CLUSTER FORMAT RETRAIN -- ARGS...: one replay, one manifest line.
STEP=0
run_eval() {
  local name=$1 kind=$2 source=$3 cluster=$4 format=$5 retrain=$6
  shift 7
  STEP=$((STEP + 1))
  local base json err t0 rc=0 status=ok message=
  base=$(printf '%02d-%s' "$STEP" "$(printf '%s' "$name" | tr -c 'A-Za-z0-9_.-' '_')")
  json=$OUT/$base.json
  err=$OUT/$base.stderr
  printf '[%2d] eval %-34s ' "$STEP" "$name"
  t0=$(now)
  "$RS" "$@" --retrain-every "$retrain" --test-fraction "$TEST_FRACTION" --json \
    >"$json" 2>"$err" </dev/null || rc=$?
  local secs
  secs=$(elapsed "$t0" "$(now)")
  if [[ $rc -ne 0 ]]; then
    status=failed
    message="exit $rc: $(last_error "$err")"
    rm -f "$json"
    json=
    echo "${secs} s  FAILED ($message)"
  else
    echo "${secs} s"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$kind" "$source" "$cluster" \
    "$format" "$retrain" "$json" "$status" "$secs" "$message" >>"$MANIFEST"
}

# Short name of a trace: the file name without extensions and the PWA version suffix
# (KTH-SP2-1996-2.1-cln -> KTH-SP2); a file in a subfolder keeps the folder in brackets.
trace_name() {
  local rel=${1#"$TRACES"/} base
  base=$(basename "$rel")
  base=${base%.gz}
  base=${base%.swf}
  base=$(echo "$base" | sed -E 's/-(19|20)[0-9]{2}-[0-9.]+-cln$//; s/\..*$//')
  if [[ $rel == */* ]]; then
    echo "$base ($(dirname "$rel"))"
  else
    echo "$base"
  fi
}

# The clusters a store holds, one a line (from the report's `clusters` list; --all-clusters,
# since by default the report covers one).
store_clusters() {
  "$RS" --db "$1" report --json --all-clusters |
    python3 -c 'import json, sys; print("\n".join(json.load(sys.stdin)["clusters"]))'
}

echo "== traces from $TRACES (--retrain-every $TRACE_RETRAIN)"
mapfile -t SWF < <(find "$TRACES" -type f \( -name '*.swf' -o -name '*.swf.gz' \) | LC_ALL=C sort)
if [[ ${#SWF[@]} -eq 0 ]]; then
  echo "accuracy.sh: error: no SWF trace (*.swf, *.swf.gz) under $TRACES" >&2
  exit 1
fi
for f in "${SWF[@]}"; do
  run_eval "$(trace_name "$f")" trace "$f" trace swf "$TRACE_RETRAIN" -- \
    eval --trace "$f" --format swf
done

# Usage files are ingested into a store of their own (one per file) so that each cluster in
# a file is replayed alone: `eval --trace` would put every job of a file under one cluster.
echo "== usage data from data/usage (--retrain-every $USAGE_RETRAIN, one replay per cluster)"
ingest_and_eval() {
  local file=$1 db=$2
  shift 2
  local t0
  printf '     ingest %-32s ' "$(basename "$file")"
  t0=$(now)
  if ! "$RS" --db "$db" ingest "$@" --json "$file" >"$db.ingest.json" 2>"$db.ingest.stderr"; then
    echo "FAILED: $(last_error "$db.ingest.stderr")"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(basename "$file")" usage "$file" - \
      "$1" "$USAGE_RETRAIN" "" failed 0 "ingest failed: $(last_error "$db.ingest.stderr")" \
      >>"$MANIFEST"
    return 0
  fi
  echo "$(elapsed "$t0" "$(now)") s"
  local cluster
  while read -r cluster; do
    run_eval "$cluster" usage "$file" "$cluster" "$1" "$USAGE_RETRAIN" -- \
      --db "$db" eval --store --cluster "$cluster"
  done < <(store_clusters "$db")
}

for f in data/usage/clustercockpit/*.csv data/usage/clustercockpit/*.csv.gz; do
  [[ -f $f ]] || continue
  db=$OUT/usage-$(basename "${f%%.*}").db
  ingest_and_eval "$f" "$db" clustercockpit
done

# sacct files here are headerless; their first line is a '#' comment holding the sacct command
# that wrote them (see data/usage/SOURCES.md), from which the columns and delimiter are read.
for f in data/usage/slurm/*.txt data/usage/slurm/*.txt.gz; do
  [[ -f $f ]] || continue
  head_line=$( (zcat -f "$f" || true) | head -n 1)
  columns=$(echo "$head_line" | sed -nE 's/.*--format=([^ ]+).*/\1/p')
  delimiter=$(echo "$head_line" | sed -nE 's/.*--delimiter=([^ ]+).*/\1/p')
  args=(sacct)
  [[ -n $columns ]] && args+=(--columns "$columns")
  [[ -n $delimiter ]] && args+=(--delimiter "$delimiter")
  # The cluster name: habrok for the Hábrók file (as in SOURCES.md), else the file's stem.
  case $(basename "$f") in
    *habrok*) cluster=habrok ;;
    *) cluster=$(basename "${f%%.*}") ;;
  esac
  args+=(--cluster "$cluster")
  db=$OUT/usage-$(basename "${f%%.*}").db
  ingest_and_eval "$f" "$db" "${args[@]}"
done

PODS=${PODS:-../shared/data/usage/alibaba-genai-2026/pod_gpu_memory_used_bytes_anon.csv.gz}
PODS_ARGS=()
if [[ -f $PODS ]]; then
  echo "== long-running pods from $PODS"
  PODS_CMD="rightsize eval pods --gpu-memory $PODS --json"
  if "$RS" eval pods --gpu-memory "$PODS" --json >"$OUT/pods.json" 2>"$OUT/pods.stderr"; then
    PODS_ARGS=(--pods "$OUT/pods.json" --pods-command "$PODS_CMD")
  else
    echo "accuracy.sh: eval pods FAILED: $(last_error "$OUT/pods.stderr")"
  fi
fi

WALL=$(elapsed "$START" "$(now)")
echo "== all replays took $WALL s; rendering $DOC"
VERSION=$("$RS" --version 2>/dev/null || echo "unknown")
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ $COMMIT != unknown ]] && ! git diff --quiet HEAD -- src 2>/dev/null; then
  COMMIT="$COMMIT + uncommitted changes in src/"
fi
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
python3 scripts/accuracy_table.py --manifest "$MANIFEST" --output "$DOC" \
  --command "scripts/accuracy.sh${1:+ $1}" \
  --date "$(date -u '+%Y-%m-%d %H:%M UTC')" \
  --machine "$(nproc) CPUs${CPU:+ ($CPU)}, $(uname -srm)" \
  --version "$VERSION" --commit "$COMMIT" --wall-seconds "$WALL" \
  --traces-dir "$TRACES" "${PODS_ARGS[@]}"
echo "== wrote $DOC (documents in $OUT/)"
