#!/usr/bin/env bash
# Make sure a headless Chromium is available for the browser-client tests (analytics.js):
# use the machine's (/usr/bin/chromium, or $CHROMIUM), else install Debian's `chromium` package
# with apt-get, else stop with a clear message.
set -euo pipefail

if [ -n "${CHROMIUM:-}" ] && [ -x "$CHROMIUM" ]; then
  exit 0
fi
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi

if command -v apt-get >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
      echo "ensure-chromium: chromium is missing and installing it needs root: apt-get install chromium" >&2
      exit 1
    fi
  fi
  echo "ensure-chromium: installing chromium with apt-get ..." >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
  exit 0
fi

echo "ensure-chromium: the browser tests need Chromium; install it and put chromium on PATH (or set CHROMIUM)." >&2
exit 1
