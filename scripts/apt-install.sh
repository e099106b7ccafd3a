#!/usr/bin/env bash
# Install Debian packages with apt-get, for the scripts/ensure-*.sh checks: the one place that
# knows how (root or sudo, a non-interactive quiet install, waiting for another apt-get's lock).
#
#   scripts/apt-install.sh [options] PACKAGE...
#     --for NAME            prefix of the messages (the calling script's name)
#     --missing WHAT        what is missing, for the message when installing it needs root
#     --otherwise MESSAGE   what to print when apt-get is missing (default: install the packages)
#     --no-recommends       apt-get install --no-install-recommends
#     --no-services         keep the packages' maintainer scripts from starting system services
#
# Stops with a message and exit status 1 when apt-get is missing, or when not root and sudo is
# missing.
set -euo pipefail

name="apt-install"
missing=""
otherwise=""
install_options=()
no_services=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --for) name="$2"; shift 2 ;;
    --missing) missing="$2"; shift 2 ;;
    --otherwise) otherwise="$2"; shift 2 ;;
    --no-recommends) install_options+=(--no-install-recommends); shift ;;
    --no-services) no_services=1; shift ;;
    --) shift; break ;;
    -*) echo "apt-install: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ "$#" -eq 0 ]; then
  echo "usage: apt-install.sh [--for NAME] [--missing WHAT] [--otherwise MESSAGE] [--no-recommends]" \
    "[--no-services] PACKAGE..." >&2
  exit 2
fi
packages=("$@")

if ! command -v apt-get >/dev/null 2>&1; then
  echo "$name: ${otherwise:-missing ${packages[*]}; install them}" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    if [ -n "$missing" ]; then
      echo "$name: $missing is missing and installing it needs root: apt-get install ${packages[*]}" >&2
    else
      echo "$name: installing ${packages[*]} needs root: apt-get install ${packages[*]}" >&2
    fi
    exit 1
  fi
fi

if [ -n "$no_services" ]; then
  # policy-rc.d exit 101 = "action forbidden"; removed afterwards if this script put it there
  policy=/usr/sbin/policy-rc.d
  made_policy=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
    $sudo chmod +x "$policy"
    made_policy=1
  fi
  cleanup() { if [ -n "$made_policy" ]; then $sudo rm -f "$policy"; fi; }
  trap cleanup EXIT
fi

echo "$name: installing ${packages[*]} with apt-get ..." >&2
$sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
  ${install_options[@]+"${install_options[@]}"} "${packages[@]}" >/dev/null
