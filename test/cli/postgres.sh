# A real PostgreSQL 15 for whole-program tests: pg_start initdb's a cluster in a temporary
# folder, starts it on a free port of 127.0.0.1 (no fsync) and exports RIGHTSIZE_PG_URL (a
# postgresql:// URL of an empty database); pg_stop stops and deletes it. Run as root, the server
# runs as the postgres user (initdb refuses root). Usage: source postgres.sh; pg_start || exit 77
# (pg_start returns 77, saying why, only where Debian's postgresql-15 is not installed).
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
PG_ROOT=""

pg_start() {
  if [ ! -x "$PG_BIN/initdb" ]; then
    echo "SKIP: PostgreSQL is not installed here (no $PG_BIN/initdb; scripts/install-deps.sh installs postgresql-15)"
    return 77
  fi
  PG_ROOT=$(mktemp -d /tmp/rightsize-pg.XXXXXX)
  local as=()
  if [ "$(id -u)" = 0 ]; then
    chown postgres:postgres "$PG_ROOT"
    as=(runuser -u postgres --)
  fi
  (cd / && "${as[@]}" "$PG_BIN/initdb" -D "$PG_ROOT/data" -U postgres -A trust -N --locale=C \
    -E UTF8 >"$PG_ROOT/initdb.log" 2>&1) || { cat "$PG_ROOT/initdb.log"; return 1; }
  local port
  for _ in 1 2 3 4 5; do
    port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    if (cd / && "${as[@]}" "$PG_BIN/pg_ctl" -D "$PG_ROOT/data" -l "$PG_ROOT/server.log" -w -t 60 \
      -o "-k $PG_ROOT -h 127.0.0.1 -p $port -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
      start >/dev/null 2>&1); then
      PG_PORT=$port
      "${as[@]}" "$PG_BIN/psql" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres \
        -c "CREATE DATABASE rightsize" >/dev/null || return 1
      export RIGHTSIZE_PG_URL="postgresql://postgres@127.0.0.1:$port/rightsize"
      return 0
    fi
  done
  cat "$PG_ROOT/server.log"
  return 1
}

# pg_psql SQL: runs SQL on the test database, unaligned output without headers.
pg_psql() {
  "$PG_BIN/psql" -qAtX "$RIGHTSIZE_PG_URL" -c "$1"
}

pg_stop() {
  [ -n "$PG_ROOT" ] || return 0
  local as=()
  [ "$(id -u)" = 0 ] && as=(runuser -u postgres --)
  (cd / && "${as[@]}" "$PG_BIN/pg_ctl" -D "$PG_ROOT/data" -m immediate -w stop >/dev/null 2>&1) || true
  rm -rf "$PG_ROOT"
  PG_ROOT=""
}
