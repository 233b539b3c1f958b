#!/usr/bin/env bash
# cli.replicas_test on PostgreSQL: the same two `rightsize serve` replicas, real agent, elected
# trainer and follower and fail-over, on one real PostgreSQL 15 database (the store replicas share
# in production). Usage: replicas_postgres_test.sh RIGHTSIZE TESTDIR SRCDIR
set -euo pipefail
source "$2/cli/postgres.sh"
trap pg_stop EXIT
rc=0
pg_start || rc=$?
[ "$rc" -eq 0 ] || exit "$rc"
python3 "$2/cli/replicas_test.py" "$1" "$2" "$3" --store "$RIGHTSIZE_PG_URL"
