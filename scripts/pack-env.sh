#!/usr/bin/env bash
# Pack the Python environment Spark executors need to run `eventlake sync` on a cluster:
# eventlake (from this checkout) with its dependencies and pyarrow, in a fresh venv packed by
# venv-pack. pyspark is left out: executors use the pyspark of their Spark installation.
#
#   scripts/pack-env.sh [OUTPUT]              default OUTPUT: eventlake-env.tar.gz
#   PYTHON=/usr/bin/python3.11 scripts/pack-env.sh
#
# Then, in eventlake.toml:
#   [spark.conf]
#   "spark.archives" = "/path/to/eventlake-env.tar.gz#env"   # or hdfs://, s3:// where the cluster reads it
#   "spark.pyspark.python" = "./env/bin/python"
#
# venv-pack does not include the interpreter: every node needs PYTHON at the same path, with the
# same major.minor version as the driver's Python (PySpark refuses a mismatch). Build the archive on
# a machine like the nodes (same OS, same CPU architecture). Where nodes have no such Python, use
# conda-pack or bake the environment into the executor image instead.
set -euo pipefail

out="${1:-eventlake-env.tar.gz}"
python="${PYTHON:-python3}"
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$python" -m venv "$work/env"
"$work/env/bin/pip" install --quiet --disable-pip-version-check "$root" "pyarrow>=15" "pandas>=2.2,<3"
"$python" -m venv "$work/tool"
"$work/tool/bin/pip" install --quiet --disable-pip-version-check "venv-pack>=0.2"
rm -f "$out"
"$work/tool/bin/venv-pack" --prefix "$work/env" --output "$out" --quiet
echo "packed $("$work/env/bin/python" -c 'import sys; print(sys.version.split()[0])') env with \
eventlake into $out ($(du -h "$out" | cut -f1)); interpreter on every node: $(readlink -f "$work/env/bin/python")"
