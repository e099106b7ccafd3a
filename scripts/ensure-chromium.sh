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

exec "$(dirname "$0")/apt-install.sh" --for ensure-chromium --missing chromium --no-recommends \
  --otherwise "the browser tests need Chromium; install it and put chromium on PATH (or set CHROMIUM)." \
  chromium
