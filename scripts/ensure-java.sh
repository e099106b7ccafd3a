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

if command -v apt-get >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
      echo "ensure-java: Java 17 is missing and installing it needs root: apt-get install openjdk-17-jre-headless" >&2
      exit 1
    fi
  fi
  echo "ensure-java: installing openjdk-17-jre-headless with apt-get ..." >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  exit 0
fi

echo "ensure-java: Java 17 is required (Spark 4). Install a JDK/JRE 17 and put java on PATH or set JAVA_HOME." >&2
exit 1
