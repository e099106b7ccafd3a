"""Listing keys of an object store as the local disk lists files: the glob matching that every
object-store back end (S3, Azure) shares, so that ``list(folder, pattern)`` answers the same on
every store (``*`` does not cross ``/``; ``**`` does)."""

from __future__ import annotations

from fnmatch import fnmatchcase


def glob_match(relative: str, pattern: str) -> bool:
    """Whether a ``/``-separated relative key matches a pathlib-style glob: each segment is an
    ``fnmatch`` pattern for one path component (``*`` does not cross ``/``), and a ``**`` segment
    matches any number of components, none included."""
    return _match(tuple(relative.split("/")), tuple(p for p in pattern.split("/") if p))


def _match(parts: tuple[str, ...], patterns: tuple[str, ...]) -> bool:
    if not patterns:
        return not parts
    if patterns[0] == "**":
        return any(_match(parts[i:], patterns[1:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatchcase(parts[0], patterns[0]) and _match(parts[1:], patterns[1:])
