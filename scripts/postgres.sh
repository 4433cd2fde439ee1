#!/usr/bin/env bash
# Throwaway PostgreSQL for the test suite: install (Debian), init, start, stop.
# Usage: scripts/postgres.sh start|stop|dsn
# The cluster lives in $SCIX_PG_DIR (default .scix/pg), listens on
# 127.0.0.1:$SCIX_PG_PORT (default 54329) with a private socket dir, trust auth.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${SCIX_PG_DIR:-$here/.scix/pg}
port=${SCIX_PG_PORT:-54329}
dsn="postgresql://postgres@127.0.0.1:$port/postgres"

find_bin() {
  local b
  b=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  echo "$b"
}

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

install() {
  if [ -z "$(find_bin)" ]; then
    echo "installing PostgreSQL (Debian package postgresql)..." >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null && apt-get install -y -qq postgresql >/dev/null
  fi
}

start() {
  install
  local bin; bin=$(find_bin)
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir"
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_pg "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync >/dev/null
  fi
  mkdir -p "$dir/sock"; [ "$(id -u)" = 0 ] && chown postgres:postgres "$dir/sock"
  if ! as_pg "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 \
      -o "-p $port -k $dir/sock -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null
  fi
  echo "$dsn"
}

stop() {
  local bin; bin=$(find_bin)
  [ -n "$bin" ] && [ -f "$dir/data/PG_VERSION" ] && as_pg "$bin/pg_ctl" -D "$dir/data" -m fast stop >/dev/null 2>&1 || true
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  dsn) echo "$dsn" ;;
  *) echo "usage: $0 start|stop|dsn" >&2; exit 2 ;;
esac
