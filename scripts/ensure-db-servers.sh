#!/usr/bin/env bash
# Make sure the database servers and JDBC drivers the catalog tests use are installed:
# PostgreSQL (initdb, pg_ctl), MariaDB (mariadb-install-db, mariadbd) and the JDBC drivers
# /usr/share/java/postgresql.jar and /usr/share/java/mariadb-java-client.jar.
# Installs only what is missing, with apt-get, and never leaves a system service running:
# the tests start their own server instances in temporary directories on 127.0.0.1.
set -euo pipefail

packages=()
pg_bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
if [ -z "$pg_bin" ] || [ ! -x "$pg_bin/initdb" ] || [ ! -x "$pg_bin/pg_ctl" ]; then
  packages+=(postgresql)
fi
if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; then
  packages+=(mariadb-server)
fi
[ -f /usr/share/java/postgresql.jar ] || packages+=(libpostgresql-jdbc-java)
[ -f /usr/share/java/mariadb-java-client.jar ] || packages+=(libmariadb-java)

if [ "${#packages[@]}" -eq 0 ]; then
  exit 0
fi

exec "$(dirname "$0")/apt-install.sh" --for ensure-db-servers --no-recommends --no-services \
  --otherwise "missing ${packages[*]}; install them (the catalog integration tests need them)" \
  "${packages[@]}"
