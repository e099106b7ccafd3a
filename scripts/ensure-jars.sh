#!/usr/bin/env bash
# Fetch a pinned set of Maven artifacts into .cache/jars/<set>/ (ignored by git) and check every
# jar against scripts/jars/<set>/SHA256SUMS; the only set today is `s3a` (Hadoop's S3 connector
# for Spark, see scripts/jars/s3a/pom.xml). Works offline once fetched: nothing is downloaded while
# the folder holds exactly the pinned files with their checksums.
#
#   scripts/ensure-jars.sh [--update-sums] [SET]    (SET defaults to s3a)
#
# Maven resolves the artifacts into its local repository (~/.m2/repository), then copies them here
# (scripts/maven.sh: the machine's Maven settings, or EVENTLAKE_MAVEN_MIRROR=https://repo.example.com/maven2).
# The Trino server, a tar.gz to unpack, has its own script: scripts/ensure-trino.sh.
# --update-sums rewrites SHA256SUMS from what Maven resolved (after changing the pom's versions).
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
update_sums=""
if [ "${1:-}" = "--update-sums" ]; then
  update_sums=1
  shift
fi
set_name="${1:-s3a}"
spec="$here/scripts/jars/$set_name"
target="$here/.cache/jars/$set_name"
sums="$spec/SHA256SUMS"
if [ ! -f "$spec/pom.xml" ]; then
  echo "ensure-jars: no jar set $set_name (expected $spec/pom.xml)" >&2
  exit 2
fi

# the folder holds exactly the files SHA256SUMS names, each with its checksum
complete() {
  local folder="$1"
  [ -f "$sums" ] && [ -d "$folder" ] || return 1
  (cd "$folder" && sha256sum --check --strict --quiet "$sums" >/dev/null 2>&1) || return 1
  [ "$(find "$folder" -maxdepth 1 -name '*.jar' | wc -l)" -eq "$(grep -c '\.jar$' "$sums")" ]
}

if [ -z "$update_sums" ] && complete "$target"; then
  exit 0
fi

mkdir -p "$here/.cache/jars"
work="$(mktemp -d "$here/.cache/jars/.$set_name.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# shellcheck source=scripts/maven.sh
source "$here/scripts/maven.sh"
maven_command "$work" ensure-jars
maven+=(-f "$spec/pom.xml")
echo "ensure-jars: fetching the $set_name jars (scripts/jars/$set_name/pom.xml) with Maven ..." >&2
started=$SECONDS
"${maven[@]}" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$work/jars" >&2

if [ -n "$update_sums" ]; then
  (cd "$work/jars" && sha256sum -- *.jar) >"$sums"
  echo "ensure-jars: wrote $sums" >&2
elif ! complete "$work/jars"; then
  echo "ensure-jars: what Maven resolved for $set_name does not match $sums:" >&2
  (cd "$work/jars" && sha256sum --check --strict "$sums" 2>&1 | grep -v ': OK$' >&2) || true
  (cd "$work/jars" && ls -- *.jar) | grep -vxFf <(sed 's/^[0-9a-f]*  //' "$sums") | sed 's/^/  not pinned: /' >&2 || true
  echo "ensure-jars: a mirror serving other bytes, or a changed pom: nothing was installed" >&2
  exit 1
fi
rm -rf "$target"
mv "$work/jars" "$target"
echo "ensure-jars: $(du -sh "$target" | cut -f1) of jars in .cache/jars/$set_name ($((SECONDS - started)) s)" >&2
