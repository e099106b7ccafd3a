#!/usr/bin/env bash
# Install the npm packages of the client-library tests (Segment's @segment/analytics-node and
# @segment/analytics-next, and playwright-core to drive Debian's Chromium) and of the storage
# tests (Azurite, the Azure Blob Storage emulator: a devDependency) into tests/clients/node_modules,
# exactly as tests/clients/package-lock.json pins them (`npm ci`). Azurite is pinned to 3.35.0,
# the last release that runs on Node.js 18/20 (3.36 wants 21+, 3.37 wants 22+).
# Node.js and npm come from the machine, else from Debian's packages (apt-get).
# Re-runs are instant: nothing happens while node_modules matches the lock file.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
project="$here/tests/clients"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  "$here/scripts/apt-install.sh" --for ensure-node-deps --missing Node.js \
    --otherwise "the client tests need Node.js 18+ and npm; install them and put them on PATH." \
    nodejs npm
fi

major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 18 ]; then
  echo "ensure-node-deps: Node.js $(node --version) is too old; the client tests need 18 or newer" >&2
  exit 1
fi

stamp="$project/node_modules/.package-lock.json"  # written by npm after every install
if [ -f "$stamp" ] && [ "$stamp" -nt "$project/package-lock.json" ] && [ "$stamp" -nt "$project/package.json" ]; then
  exit 0
fi
echo "ensure-node-deps: npm ci in tests/clients ..." >&2
npm ci --prefix "$project" --no-audit --no-fund --loglevel=error >/dev/null
