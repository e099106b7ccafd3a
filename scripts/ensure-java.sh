#!/usr/bin/env bash
# Make sure Java 17+ is available for Spark: use the machine's, else install
# openjdk-17-jre-headless with apt-get, else stop with a clear message.
set -euo pipefail

java_major() {
  "$1" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1
}

java_bin=""
if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
  java_bin="$JAVA_HOME/bin/java"
elif command -v java >/dev/null 2>&1; then
  java_bin="$(command -v java)"
fi

if [ -n "$java_bin" ]; then
  major="$(java_major "$java_bin")"
  if [ -n "$major" ] && [ "$major" -ge 17 ]; then
    exit 0
  fi
  echo "ensure-java: $java_bin is Java ${major:-?}; Spark 4 needs Java 17 or newer" >&2
fi

exec "$(dirname "$0")/apt-install.sh" --for ensure-java --missing "Java 17" \
  --otherwise "Java 17 is required (Spark 4). Install a JDK/JRE 17 and put java on PATH or set JAVA_HOME." \
  openjdk-17-jre-headless
