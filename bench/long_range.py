"""Long ranges on S3: `eventlake import`, `eventlake sync` and `eventlake replay` of D days of small
archive files on a lake in a bucket (a moto server) against the same on a local lake.

Fabricates a Segment export of ``--days`` days (default 7) of ``--files-per-day`` gzip files (default
288: a file every 5 minutes) of ``--messages-per-file`` messages (default 50; bench/sync.py's
messages), in Segment's layout, once on disk and once in a bucket. Then, for each lake (both on a
Glue catalog served by the same moto, so that the store is the only difference), times as whole
processes: `eventlake import <export>` (the bucket's copy for the S3 lake), `eventlake sync` (reads
every imported file) and `eventlake replay --from <first day> --to <last day>` (reads them again),
with the count of S3 requests moto served during each.

Then, in this process, the import alone (library call, no start-up) with the read-ahead off
(``PREFETCH_FILES = 1``: one file at a time, as before) and on (the default), bucket to bucket and
disk to disk, into fresh lakes: the before/after of the change.

    .venv/bin/python bench/long_range.py
    .venv/bin/python bench/long_range.py --days 7 --files-per-day 96 --workdir /tmp/bench-long
    .venv/bin/python bench/long_range.py --days 7 --files-per-day 24 --lakes s3   # the S3 half only
"""

from __future__ import annotations

import argparse
import collections
import gzip
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from s3_sync import AWS_ENV, Moto, create_project, request_kind, with_settings  # noqa: E402

from sync import EVENTLAKE, START, _message  # noqa: E402

BUCKET = "eventlake-bench"
EXPORT_BUCKET = "segment-export"
SEGMENT_SOURCE = "AbC123"


def fabricate(export: Path, days: int, per_day: int, per_file: int) -> tuple[int, int, int]:
    """Segment's layout under ``export/segment-logs/<source>/<day-ms>/<name>.gz``: files, messages, bytes."""
    rng = random.Random(11)
    files = messages = size = 0
    for day in range(days):
        midnight = START + timedelta(days=day)
        folder = export / "segment-logs" / SEGMENT_SOURCE / str(int(midnight.timestamp() * 1000))
        folder.mkdir(parents=True, exist_ok=True)
        for f in range(per_day):
            opened = midnight + timedelta(seconds=f * 86400 / per_day)
            lines = [
                orjson.dumps(_message(rng, messages + i, opened + timedelta(milliseconds=i), "bench"))
                for i in range(per_file)
            ]
            path = folder / f"{int(opened.timestamp() * 1000)}.{f:04x}.gz"
            path.write_bytes(gzip.compress(b"\n".join(lines) + b"\n", compresslevel=1))
            files += 1
            messages += per_file
            size += path.stat().st_size
    return files, messages, size


def upload(s3, export: Path) -> None:
    for path in sorted(export.rglob("*.gz")):
        s3.put_object(Bucket=EXPORT_BUCKET, Key=path.relative_to(export).as_posix(), Body=path.read_bytes())


def timed(name: str, command: list[str], project: Path, env: dict[str, str], moto: Moto) -> tuple[float, str]:
    """Run one eventlake command in ``project``: its wall seconds and the S3 requests it made."""
    served = len(moto.requests())
    started = time.monotonic()
    done = subprocess.run([EVENTLAKE, *command], cwd=project, env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    if done.returncode:
        failed = f"{name}: eventlake {' '.join(command)} exited {done.returncode}"
        raise SystemExit(f"{failed}\n{done.stderr[-3000:]}")
    kinds = collections.Counter(request_kind(m, p) for _, m, p in moto.requests()[served:])
    s3 = ", ".join(f"{k[3:]} {n:,}" for k, n in kinds.most_common() if k.startswith("S3 ")) or "none"
    print(f"  {name:<28} {wall:7.1f} s   S3 requests: {s3}; Glue requests: {kinds['Glue']:,}", flush=True)
    return wall, s3


def in_process_imports(
    export: Path, endpoint: str, source_id: str, work: Path
) -> list[tuple[str, str, float]]:
    """The import as a library call, read-ahead off then on, disk to disk and bucket to bucket."""
    from eventlake.archive.importer import import_segment_archive
    from eventlake.storage import LocalStorage, prefetch, to_location
    from eventlake.storage.s3 import S3Storage

    s3 = S3Storage(endpoint_url=endpoint)
    rows = []
    for ahead in (1, prefetch.PREFETCH_FILES):
        prefetch.PREFETCH_FILES = ahead
        label = "one at a time" if ahead == 1 else f"{ahead} at a time"
        lake = work / f"import-local-{ahead}"
        started = time.monotonic()
        import_segment_archive(LocalStorage(), export, LocalStorage(), lake, source_id)
        rows.append(("local", label, time.monotonic() - started))
        started = time.monotonic()
        import_segment_archive(
            s3, to_location(f"s3://{EXPORT_BUCKET}/segment-logs"), s3,
            to_location(f"s3://{BUCKET}/import-{ahead}"), source_id,
        )  # fmt: skip
        rows.append(("S3 (moto)", label, time.monotonic() - started))
        shutil.rmtree(lake, ignore_errors=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--files-per-day", type=int, default=288)
    parser.add_argument("--messages-per-file", type=int, default=50)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--lakes", nargs="+", choices=["local", "s3"], default=["local", "s3"])
    args = parser.parse_args()

    work = args.workdir or Path(tempfile.mkdtemp(prefix="eventlake-bench-long-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLAKE") and not k.startswith("AWS_")}
    env.update(AWS_ENV)
    os.environ.update(AWS_ENV)

    export = work / "export"
    shutil.rmtree(export, ignore_errors=True)
    files, messages, size = fabricate(export, args.days, args.files_per_day, args.messages_per_file)
    print(f"fabricated {args.days} days: {files:,} files, {messages:,} messages, {size / 1e6:.1f} MB gzip")
    first = START.strftime("%Y-%m-%d")
    last = (START + timedelta(days=args.days - 1)).strftime("%Y-%m-%d")

    moto = Moto(work / "moto.log").start()
    results: dict[str, dict[str, tuple[float, str]]] = {}
    try:
        import boto3

        s3 = boto3.client("s3", endpoint_url=moto.endpoint)
        s3.create_bucket(Bucket=BUCKET)
        s3.create_bucket(Bucket=EXPORT_BUCKET)
        upload(s3, export)
        local_project = work / "local"
        base = create_project(local_project, env).read_text()
        source_id = re.search(r'^id = "([^"]+)"', base, re.M).group(1)
        configs = {
            "local": (local_project, with_settings(base, endpoint=moto.endpoint, glue=True), str(export)),
            "S3 (moto)": (
                work / "s3",
                with_settings(base, root=f"s3://{BUCKET}/lake", endpoint=moto.endpoint, glue=True),
                f"s3://{EXPORT_BUCKET}/segment-logs",
            ),
        }
        for name, (project, text, source) in configs.items():
            if ("local" if name == "local" else "s3") not in args.lakes:
                continue
            if name != "local":
                create_project(project, env, text)
            else:
                (project / "eventlake.toml").write_text(text)
            print(f"\n{name} lake", flush=True)
            importing = ["import", source, "--source", "bench", "--endpoint-url", moto.endpoint]
            replaying = ["replay", "--source", "bench", "--from", first, "--to", last]
            results[name] = {
                "import": timed("eventlake import", importing, project, env, moto),
                "sync": timed("eventlake sync", ["sync"], project, env, moto),
                "replay": timed(f"eventlake replay {args.days} days", replaying, project, env, moto),
            }
        print("\nimport alone (library call, fresh lakes)", flush=True)
        rows = in_process_imports(export, moto.endpoint, source_id, work)
    finally:
        moto.stop()

    if len(results) == 2:
        print("\n| step | local | S3 (moto) | S3 / local |\n|---|---|---|---|")
        for step in ("import", "sync", "replay"):
            here, there = results["local"][step][0], results["S3 (moto)"][step][0]
            print(f"| `eventlake {step}` | {here:.1f} s | {there:.1f} s | {there / here:.2f} |")
    print("\n| import, library call | lake | seconds |\n|---|---|---|")
    for lake, label, seconds in rows:
        print(f"| {label} | {lake} | {seconds:.2f} |")


if __name__ == "__main__":
    main()
