#!/usr/bin/env bash
# Fetch the pinned Trino server (scripts/trino/pom.xml) with Maven, check it against
# scripts/trino/SHA256SUMS and unpack what the Trino test tier (tests/trino) runs into
# .cache/trino/<server>/ (ignored by git): lib/ and plugin/hive/, about 0.4 GB of the 0.8 GB archive
# (the other plugins are left packed). Works offline once done: nothing is fetched while the folder
# holds a complete unpack of the archive with the pinned checksum.
#
#   scripts/ensure-trino.sh [--update-sums]
#
# Maven settings and mirrors: scripts/maven.sh (EVENTLAKE_MAVEN_MIRROR). The archive is read from
# Maven's local repository through a temporary copy, deleted once unpacked. Running the server needs
# Java 24 or newer (tests/trino/server.py finds one; EVENTLAKE_TRINO_JAVA_HOME names yours).
# --update-sums rewrites SHA256SUMS from what Maven resolved (after changing the pom's version).
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
update_sums=""
if [ "${1:-}" = "--update-sums" ]; then
  update_sums=1
fi
spec="$here/scripts/trino"
sums="$spec/SHA256SUMS"
archive="$(sed -n 's/^[0-9a-f]\{64\}  //p' "$sums" | head -n 1)"    # trino-server-476.tar.gz
server="${archive%.tar.gz}"                                         # trino-server-476
target="$here/.cache/trino/$server"
marker="$target/.unpacked"   # the checksum of the archive it was unpacked from, written last

if [ -z "$update_sums" ] && [ -f "$marker" ] && [ "$(cat "$marker")" = "$(head -n 1 "$sums")" ]; then
  exit 0
fi

mkdir -p "$here/.cache/trino"
work="$(mktemp -d "$here/.cache/trino/.fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# shellcheck source=scripts/maven.sh
source "$here/scripts/maven.sh"
maven_command "$work" ensure-trino
maven+=(-f "$spec/pom.xml")
echo "ensure-trino: fetching $archive (scripts/trino/pom.xml, about 820 MB) with Maven ..." >&2
started=$SECONDS
"${maven[@]}" dependency:copy-dependencies -DincludeTypes=tar.gz -DoutputDirectory="$work/archive" >&2

if [ -n "$update_sums" ]; then
  (cd "$work/archive" && sha256sum -- *.tar.gz) >"$sums"
  echo "ensure-trino: wrote $sums; run it again without --update-sums to unpack" >&2
  exit 0
fi
if ! (cd "$work/archive" && sha256sum --check --strict --quiet "$sums" >&2); then
  echo "ensure-trino: $archive from Maven does not match $sums (a mirror serving other bytes, or a" \
    "changed pom): nothing was installed" >&2
  exit 1
fi

# The archive stores each jar once and the other copies as hard links, across plugins: unpack lib/,
# plugin/hive/ and the files their links point to, then keep only lib/ and plugin/hive/.
tar -tvzf "$work/archive/$archive" >"$work/listing"
{
  echo "$server/lib/"
  echo "$server/plugin/hive/"
  awk -v want="^$server/(lib|plugin/hive)/" '$0 ~ / link to / && $6 ~ want && $NF !~ want { print $NF }' \
    "$work/listing"
} | sort -u >"$work/members"
mkdir "$work/unpacked"
tar -xzf "$work/archive/$archive" -C "$work/unpacked" --no-same-owner -T "$work/members"
rm -rf "$target"
mkdir -p "$target/plugin"
mv "$work/unpacked/$server/lib" "$target/lib"
mv "$work/unpacked/$server/plugin/hive" "$target/plugin/hive"
head -n 1 "$sums" >"$marker"
echo "ensure-trino: $(du -sh "$target" | cut -f1) in .cache/trino/$server ($((SECONDS - started)) s)" >&2
