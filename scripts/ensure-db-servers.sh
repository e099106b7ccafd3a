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

if ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-db-servers: missing ${packages[*]}; install them (the catalog integration tests need them)" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "ensure-db-servers: installing ${packages[*]} needs root: apt-get install ${packages[*]}" >&2
    exit 1
  fi
fi

# keep the packages' maintainer scripts from starting system-wide servers (policy-rc.d exit 101 =
# "action forbidden"); removed afterwards if this script put it there
policy=/usr/sbin/policy-rc.d
made_policy=""
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod +x "$policy"
  made_policy=1
fi
cleanup() { if [ -n "$made_policy" ]; then $sudo rm -f "$policy"; fi; }
trap cleanup EXIT

echo "ensure-db-servers: installing ${packages[*]} with apt-get ..." >&2
$sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
