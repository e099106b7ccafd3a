"""Spark start-up with and without the driver's class-data archive (AppCDS, eventlake.jvm.class_archive).

Times, each as a whole process (the Python process and the driver JVM it starts, waited for to its
exit, so that the JVM's CPU is counted), N runs of each, in turn (with, without, without, with, ...):

- session: ``spark_session`` on a fresh embedded-Derby state folder, ``CREATE DATABASE``, one tiny
  query, stop: what every ``eventlake`` command that starts Spark pays before its work;
- sync: ``eventlake sync`` of a tiny archive (200 messages, 2 files) into a fresh copy of a project.

The archive lives in a fresh folder of the run (``--workdir``): the first run with it makes it
(reported apart: what the first start on a machine costs), the others map it. Prints each figure's
median and the ratio with / without, pair by pair (medians of the pairs' ratios).

    .venv/bin/python bench/jvm_startup.py                       # 5 pairs of each
    .venv/bin/python bench/jvm_startup.py --runs 3 --only session
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sync import generate  # noqa: E402 - bench/sync.py: the same realistic messages

CHILD = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    kind, where = sys.argv[1], Path(sys.argv[2])
    try:
        if kind == "session":
            from eventlake.config import LakeSettings, Settings, SparkSettings
            from eventlake.jvm.session import spark_session
            archive = os.environ["EVENTLAKE__SPARK__CLASS_ARCHIVE"] == "true"
            folder = os.environ["EVENTLAKE__SPARK__CLASS_ARCHIVE_DIR"]
            spark = SparkSettings(class_archive=archive, class_archive_dir=folder)
            lake = LakeSettings(root=where / "lake", state_dir=where)
            settings = Settings(path=None, lake=lake, spark=spark)
            session = spark_session(settings, "jvm-startup")
            session.sql("CREATE DATABASE IF NOT EXISTS bench").collect()
            assert session.range(10).selectExpr("sum(id)").collect()[0][0] == 45
            session.stop()
        else:
            from eventlake.cli import cli
            os.chdir(where)
            try:
                cli(["sync"], prog_name="eventlake")
            except SystemExit as exit:
                if exit.code:
                    raise
    finally:
        from pyspark import SparkContext
        jvm = getattr(SparkContext._gateway, "proc", None)
        if jvm is not None and jvm.poll() is None:  # let the driver JVM exit, and count its CPU
            jvm.stdin.close()
            jvm.wait()
    """
)


def run(kind: str, where: Path, archive: bool, archive_dir: Path) -> tuple[float, float]:
    """(wall s, CPU s of the process and every child it waited for) of one child run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLAKE")}
    env["EVENTLAKE__SPARK__CLASS_ARCHIVE"] = "true" if archive else "false"
    env["EVENTLAKE__SPARK__CLASS_ARCHIVE_DIR"] = str(archive_dir)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, kind, str(where)], env=env, capture_output=True, text=True
    )
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{kind} run failed:\n{done.stdout}\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def project_template(work: Path) -> Path:
    template = work / "template"
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLAKE")}
    eventlake = [sys.executable, "-m", "eventlake"]
    subprocess.run([*eventlake, "init", str(template)], check=True, env=env, stdout=subprocess.DEVNULL)
    add = [*eventlake, "sources", "add", "bench", "--write-key", "wk_bench"]
    subprocess.run(add, cwd=template, check=True, env=env, stdout=subprocess.DEVNULL)
    source_id = next(
        line.split('"')[1]
        for line in (template / "eventlake.toml").read_text().splitlines()
        if line.startswith("id =")
    )
    generate(template, source_id, 200, files=2)
    return template


def fresh(kind: str, work: Path, template: Path | None, n: int) -> Path:
    where = work / f"{kind}-{n:03d}"
    if template is not None:
        shutil.copytree(template, where)
    return where


def bench(kind: str, runs: int, work: Path) -> None:
    archive_dir = work / f"archive-{kind}"
    template = project_template(work) if kind == "sync" else None
    count = iter(range(10_000))
    wall, cpu = run(kind, fresh(kind, work, template, next(count)), True, archive_dir)
    while any(archive_dir.glob("*.creating")):  # a detached process puts it in place
        time.sleep(0.5)
    size = sum(p.stat().st_size for p in archive_dir.glob("*.jsa")) / 2**20
    print(
        f"{kind}: the first run with the archive makes it ({size:.0f} MiB): "
        f"{wall:.1f} s wall, {cpu:.1f} s CPU"
    )
    run(kind, fresh(kind, work, template, next(count)), False, archive_dir)  # a warm-up without
    results: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for pair in range(runs):
        for archive in (True, False) if pair % 2 == 0 else (False, True):
            results[archive].append(run(kind, fresh(kind, work, template, next(count)), archive, archive_dir))
    for label, archive in (("with the archive", True), ("without", False)):
        walls, cpus = zip(*results[archive], strict=True)
        print(f"{kind} {label:>16}: wall median {statistics.median(walls):6.1f} s "
              f"(min {min(walls):.1f}, max {max(walls):.1f}); CPU median {statistics.median(cpus):6.1f} s "
              f"(min {min(cpus):.1f}, max {max(cpus):.1f})")  # fmt: skip
    wall_ratio = statistics.median(a[0] / b[0] for a, b in zip(results[True], results[False], strict=True))
    cpu_ratio = statistics.median(a[1] / b[1] for a, b in zip(results[True], results[False], strict=True))
    print(
        f"{kind} with / without (median of {runs} pairs): wall {wall_ratio:.2f}, CPU {cpu_ratio:.2f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="pairs of runs (default 5)")
    parser.add_argument("--only", choices=("session", "sync"), default=None)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="eventlake-jvm-startup-"))
    print(f"load average at start: {os.getloadavg()[0]:.1f}; work folder {work}", flush=True)
    for kind in ("session", "sync"):
        if args.only in (None, kind):
            bench(kind, args.runs, work)
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
