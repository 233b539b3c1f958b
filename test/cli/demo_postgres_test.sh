#!/usr/bin/env bash
# The demo and the dashboard on PostgreSQL (issue 27): scripts/demo-store.sh (what `make demo`
# runs) builds the demo store into a real PostgreSQL 15 the test starts (test/cli/postgres.sh)
# and into an SQLite file; a real `rightsize serve` on each answers the dashboard's API pages
# (overview, the job list and its next page, a job page, a job list filter, the report) with the
# same figures. Exit 77 (skipped) only where postgresql-15 is not installed.
set -euo pipefail
source "$(dirname "$0")/lib.sh" "$@"
source "$(dirname "$0")/postgres.sh"
set +e
pg_start
rc=$?
set -e
[ "$rc" -eq 0 ] || exit "$rc"
servers=()
cleanup() {
  for p in "${servers[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pg_stop
  rm -rf "$WORK"
}
trap cleanup EXIT
unset RIGHTSIZE_DB

# Both stores at once (the two cores are shared anyway).
bash "$SRCDIR/scripts/demo-store.sh" "$RS" "$RIGHTSIZE_PG_URL" >"$WORK/pg-store.out" 2>&1 &
pg_build=$!
bash "$SRCDIR/scripts/demo-store.sh" "$RS" "$WORK/demo.db" >"$WORK/sqlite-store.out" 2>&1 &
sqlite_build=$!
set +e
wait "$pg_build"
pg_rc=$?
wait "$sqlite_build"
sqlite_rc=$?
set -e
expect_eq "scripts/demo-store.sh builds the demo in PostgreSQL" "$pg_rc" 0
expect_eq "scripts/demo-store.sh builds the demo in SQLite" "$sqlite_rc" 0
if [ "$pg_rc" -ne 0 ] || [ "$sqlite_rc" -ne 0 ]; then
  tail -5 "$WORK/pg-store.out" "$WORK/sqlite-store.out"
  finish
  exit 1
fi
expect_eq "the demo's jobs are in PostgreSQL" "$(pg_psql 'select count(*) from jobs')" \
  "$(sqlite3 "$WORK/demo.db" 'select count(*) from jobs')"
expect_contains "the demo trained models in PostgreSQL" \
  "$(pg_psql 'select string_agg(cluster, $$,$$ order by cluster) from models')" "alex"

# serve DB NAME: starts `rightsize serve` on DB; its port in PORT_<NAME>.
serve() {
  "$RS" --db "$1" serve --listen 127.0.0.1:0 >"$WORK/serve-$2.out" 2>"$WORK/serve-$2.err" &
  servers+=($!)
  local port
  port=$(listening_port "$WORK/serve-$2.out")
  [ -n "$port" ] || { fail "serve on $2 did not start: $(cat "$WORK/serve-$2.err")"; return 1; }
  printf -v "PORT_$2" '%s' "$port"
}
serve "$RIGHTSIZE_PG_URL" pg || { finish; exit 1; }
serve "$WORK/demo.db" sqlite || { finish; exit 1; }

# same_page WHAT PATH: the page's JSON from both servers is the same, but for what says when it
# was made (generated_at, the overview's today.until: now).
same_page() {
  curl -sf "http://127.0.0.1:$PORT_pg$2" >"$WORK/pg.json" || true
  curl -sf "http://127.0.0.1:$PORT_sqlite$2" >"$WORK/sqlite.json" || true
  local diff
  diff=$(python3 - "$WORK/pg.json" "$WORK/sqlite.json" <<'PY'
import json, sys
VOLATILE = {"generated_at"}
def load(path):
    try:
        return json.load(open(path))
    except Exception as e:
        return {"unreadable": str(e)}
def walk(a, b, where, out):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k in VOLATILE or (where.endswith(".today") and k == "until"):  # now
                continue
            if k not in a or k not in b:
                out.append(f"{where}.{k}: only in {'PostgreSQL' if k in a else 'SQLite'}")
            else:
                walk(a[k], b[k], f"{where}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{where}: {len(a)} items on PostgreSQL, {len(b)} on SQLite")
        for i, (x, y) in enumerate(zip(a, b)):
            walk(x, y, f"{where}[{i}]", out)
    elif isinstance(a, float) or isinstance(b, float):
        if not (isinstance(a, (int, float)) and isinstance(b, (int, float))) or \
                abs(a - b) > 1e-9 * max(1.0, abs(a), abs(b)):
            out.append(f"{where}: {a!r} on PostgreSQL, {b!r} on SQLite")
    elif a != b:
        out.append(f"{where}: {a!r} on PostgreSQL, {b!r} on SQLite")
pg, sq = load(sys.argv[1]), load(sys.argv[2])
out = []
if not pg or not sq:
    out.append("an empty page")
walk(pg, sq, "", out)
print("\n".join(out[:5]))
PY
  )
  if [ -z "$diff" ] && [ -s "$WORK/pg.json" ]; then
    pass "$1: the same on PostgreSQL as on SQLite ($(wc -c <"$WORK/pg.json") bytes)"
  else
    fail "$1 ($2) differs: $diff"
  fi
}
# same_list WHAT QUERY: the job list, every page of it, holds the same jobs with the same
# figures in the same order of end time on both. Jobs that end at the same time (the running
# ones) may come in another order: SQLite breaks ties by job number, PostgreSQL by arrival.
same_list() {
  local diff
  diff=$(python3 - "http://127.0.0.1:$PORT_pg/api/v1/jobs?$2" \
    "http://127.0.0.1:$PORT_sqlite/api/v1/jobs?$2" <<'PY'
import json, sys, urllib.parse, urllib.request
def pages(url):
    jobs, cursor = [], None
    for _ in range(100):
        u = url + ("&cursor=" + urllib.parse.quote(cursor) if cursor else "")
        d = json.load(urllib.request.urlopen(u, timeout=30))
        jobs += d["jobs"]
        cursor = d.get("next_cursor")
        if not cursor:
            return jobs
    raise SystemExit("more than 100 pages")
pg, sq = pages(sys.argv[1]), pages(sys.argv[2])
out = []
key = lambda j: (j["cluster"], j["job_id"])
if [j["end_time"] for j in pg] != [j["end_time"] for j in sq]:
    out.append("the end times come in another order")
a, b = {key(j): j for j in pg}, {key(j): j for j in sq}
if len(a) != len(pg) or len(b) != len(sq):
    out.append(f"a job listed twice ({len(pg)} rows, {len(a)} jobs on PostgreSQL; "
               f"{len(sq)}, {len(b)} on SQLite)")
for k in sorted(set(a) | set(b)):
    if a.get(k) != b.get(k):
        out.append(f"job {k}: {a.get(k)} on PostgreSQL, {b.get(k)} on SQLite")
print(f"ok {len(pg)}" if not out and pg else "\n".join(out[:3]) or "no jobs")
PY
  ) || true
  if [[ "$diff" == ok* ]]; then
    pass "$1: the same ${diff#ok } jobs on PostgreSQL as on SQLite"
  else
    fail "$1 (/api/v1/jobs?$2) differs: $diff"
  fi
}
same_page "overview" "/api/v1/overview"
same_list "job list, every page" "limit=100"
same_list "job list of the GPU cluster's idle jobs" "cluster=alex&efficiency_below=0.2&limit=100"
same_list "job list of a cluster's failed jobs" "cluster=habrok&state=FAILED&limit=20"
same_page "job page of the idle 8-GPU job" "/api/v1/jobs/alex/679909"
expect_contains "the job page is the job's" "$(cat "$WORK/pg.json")" '"679909"'
same_page "report of the GPU cluster" "/api/v1/report?by=user&cluster=alex"
same_page "report of every cluster" "/api/v1/report?by=account"
finish
