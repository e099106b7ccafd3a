"""Write ``eventlake.toml``: the commented initial file, appended ``[[sources]]`` blocks, a
source's ``enabled = false`` and the removal of its block (the rest of the file, comments
included, is kept as it is).

The file holds the sources' write keys and the ids that name their lake folders: it is written
whole (temp file, fsync, rename, fsync of the folder), readable by its owner only (0600). Each edit
reads, changes and writes the file holding an exclusive lock (:func:`edits`), so two edits at once
(two ``eventlake sources add``) both land, one after the other."""

from __future__ import annotations

import re
import secrets
import string
import sys
from collections.abc import Callable
from functools import update_wrapper
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

import tomli_w

from eventlake.config.loader import CONFIG_FILE, SLUG, WRITE_KEY, load_settings, settings_from_text
from eventlake.config.settings import Settings, SourceSettings
from eventlake.errors import ConfigError, UsageError
from eventlake.flock import exclusive
from eventlake.storage.local import make_dirs, write_atomic

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONFIG_MODE = 0o600  # write keys, database passwords
P = ParamSpec("P")
R = TypeVar("R")

INITIAL_CONFIG = """\
# eventlake configuration. Every setting is documented in docs/configuration.md.
# Relative paths are relative to this file.

[lake]
root = "lake"              # raw archive (segment-logs/), lake (segment-data/), reports
state_dir = ".eventlake"   # local state: collector spool, embedded metastore, locks

[catalog]
kind = "hive"              # Hive metastore on embedded Derby, kept in state_dir
# jdbc_url = "jdbc:postgresql://db:5432/hms"   # a shared metastore database, with user and password
# uri = "thrift://metastore:9083"              # or a running Hive metastore service
# (or kind = "glue" with region = "eu-west-1": the AWS Glue Data Catalog)

[spark]
master = "local[*]"
driver_memory = "2g"         # in local mode also the executors' heap

[spark.conf]
"spark.sql.shuffle.partitions" = "4"

[collector]
host = "127.0.0.1"
port = 8088
seal_max_bytes = 67108864      # seal a spool file into the archive at 64 MB ...
seal_max_age_seconds = 5.0     # ... or 5 s after its first message

[sync]
interval_seconds = 30          # `eventlake up`'s engine starts a sync this often

[query]
thrift_port = 10000            # `eventlake up` serves SQL (HiveServer2) here, or on the next free port

# Sources are added with `eventlake sources add SLUG`.
"""

_ALPHABET = string.ascii_letters + string.digits


def new_source_id() -> str:
    """A Segment-style source id: 10 random letters and digits."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(10))


def edits(edit: Callable[Concatenate[Path, P], R]) -> Callable[Concatenate[Path, P], R]:
    """An edit of the configuration file (its first argument) done holding the file's lock, from
    the read to the write: the lock file ``.<name>.lock`` beside it (the file itself is replaced by
    each write, so it cannot hold a lock), waited for while another edit holds it."""

    def locked(config_path: Path, /, *args: P.args, **kwargs: P.kwargs) -> R:
        target = config_path.resolve()  # a symlinked file: one lock, whatever the name used
        with exclusive(target.with_name(f".{target.name}.lock"), mode=CONFIG_MODE):
            return edit(config_path, *args, **kwargs)

    update_wrapper(locked, edit)
    return locked


def write_initial_config(directory: Path) -> Path:
    """Create ``DIR/eventlake.toml``; refuses to overwrite an existing one."""
    make_dirs(directory)
    path = directory / CONFIG_FILE
    if path.exists():
        raise UsageError(f"{path} already exists; edit it, or choose another directory")
    write_atomic(path, INITIAL_CONFIG.encode("utf-8"), mode=CONFIG_MODE)
    return path


@edits
def add_source(
    config_path: Path,
    slug: str,
    write_key: str | None = None,
    database: str | None = None,
    table_prefix: str = "",
    date_partition: str = "day-hour",
) -> dict[str, str]:
    """Append a ``[[sources]]`` block (keeping the file's comments) after validating the result;
    the file is replaced whole, so a failed write leaves the previous one."""
    settings = load_settings(config_path, environ={})
    if not SLUG.match(slug):
        raise ConfigError(
            "slug", f"{slug!r} is not a valid slug", "use [a-z][a-z0-9_]*, at most 63 characters"
        )
    if any(s.slug == slug for s in settings.sources):
        raise UsageError(f"source {slug!r} already exists in {config_path}")
    key = write_key or "wk_" + secrets.token_urlsafe(18).replace("-", "x")
    if not WRITE_KEY.match(key):
        raise ConfigError("write_key", "must be 1-200 characters of [A-Za-z0-9_-.]")
    entry = {"slug": slug, "id": new_source_id(), "write_key": key, "database": database or slug}
    if table_prefix:
        entry["table_prefix"] = table_prefix
    if date_partition != "day-hour":
        entry["date_partition"] = date_partition
    text = config_path.read_text(encoding="utf-8")
    block = "[[sources]]\n" + tomli_w.dumps(entry)
    new_text = text.rstrip("\n") + "\n\n" + block
    settings_from_text(new_text, config_path, environ={})  # refused before anything is written
    write_atomic(config_path.resolve(), new_text.encode("utf-8"), mode=CONFIG_MODE)  # a symlink stays one
    return entry


_HEADER = re.compile(r"^\s*\[")  # a [table] or [[array]] header line
_SOURCES_HEADER = re.compile(r"^\s*\[\[\s*sources\s*\]\]\s*(#.*)?$")
_ENABLED = re.compile(r"^\s*enabled\s*=")
_TRIVIA = re.compile(r"^\s*(#.*)?$")  # a blank or comment line


@edits
def set_source_enabled(config_path: Path, slug: str, enabled: bool) -> bool:
    """Write ``enabled = false`` into the source's ``[[sources]]`` entry (disable), or take it out
    (enable: true is the default); False when the source already was so (nothing is written)."""
    settings = load_settings(config_path, environ={})
    if settings.source(slug).enabled == enabled:
        return False
    lines = config_path.read_text(encoding="utf-8").splitlines(keepends=True)
    start, end = _source_block(lines, slug, config_path)
    body = [line for line in lines[start + 1 : end] if not _ENABLED.match(line)]
    if not enabled:
        last = max((i for i, line in enumerate(body) if not _TRIVIA.match(line)), default=-1)
        body.insert(last + 1, "enabled = false\n")
    new_lines = [*lines[: start + 1], *body, *lines[end:]]
    _check_and_write(config_path, "".join(new_lines), settings, slug, lambda s: s.enabled == enabled)
    return True


@edits
def remove_source(config_path: Path, slug: str) -> str:
    """Take the source's ``[[sources]]`` entry out of the file (its comments inside go with it,
    those after its last setting stay); the entry's text, as it was."""
    settings = load_settings(config_path, environ={})
    settings.source(slug)  # refuses an unknown slug, naming the known ones
    lines = config_path.read_text(encoding="utf-8").splitlines(keepends=True)
    start, end = _source_block(lines, slug, config_path)
    while end > start + 1 and _TRIVIA.match(lines[end - 1]):
        end -= 1  # comments and blank lines at its end belong to what follows
    removed = "".join(lines[start:end])
    head, tail = "".join(lines[:start]).rstrip("\n"), "".join(lines[end:]).lstrip("\n")
    new_text = "\n\n".join(part for part in (head, tail.rstrip("\n")) if part) + "\n"
    _check_and_write(config_path, new_text, settings, slug, None)
    return removed


def _source_block(lines: list[str], slug: str, config_path: Path) -> tuple[int, int]:
    """The lines ``[start, end)`` of the ``[[sources]]`` entry of ``slug``: its header up to the
    next header (or the end of the file)."""
    headers = [i for i, line in enumerate(lines) if _HEADER.match(line)] + [len(lines)]
    for start, end in zip(headers, headers[1:], strict=False):
        if not _SOURCES_HEADER.match(lines[start]):
            continue
        try:
            entry = tomllib.loads("".join(lines[start:end]))["sources"][0]
        except (tomllib.TOMLDecodeError, KeyError, IndexError):
            continue
        if entry.get("slug") == slug:
            return start, end
    raise UsageError(
        f"source {slug!r} is not written as a [[sources]] table in {config_path}; edit the file by hand"
    )


def _check_and_write(
    config_path: Path,
    new_text: str,
    before: Settings,
    slug: str,
    changed: Callable[[SourceSettings], bool] | None,
) -> None:
    """Write ``new_text`` once it is valid and differs from ``before`` only in ``slug``'s entry: as
    ``changed`` says, or without it (None: removed); the file is replaced whole."""
    after = settings_from_text(new_text, config_path, environ={})
    others_before = [s for s in before.sources if s.slug != slug]
    others_after = [s for s in after.sources if s.slug != slug]
    target = [s for s in after.sources if s.slug == slug]
    done = not target if changed is None else len(target) == 1 and changed(target[0])
    if others_after != others_before or not done:  # the edit touched more than the entry: refuse
        raise UsageError(
            f"could not edit the entry of source {slug!r} in {config_path}; edit the file by hand"
        )
    write_atomic(config_path.resolve(), new_text.encode("utf-8"), mode=CONFIG_MODE)
