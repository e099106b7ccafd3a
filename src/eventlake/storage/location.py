"""Locations on a store: a local :class:`~pathlib.Path`, or an :class:`ObjectPath` (a URI on an
object store: ``s3://bucket/key``, ``abfss://container@account.dfs.core.windows.net/key``,
``gs://bucket/key``).

Both offer the same pure-path operations (``/``, ``name``, ``parent``, ``with_name``,
``relative_to``, ``as_posix``), so :mod:`eventlake.layout` builds every lake location the same
way whichever store holds the lake, and only :mod:`eventlake.storage` reads or writes them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath

# a URI scheme (s3://, abfss://, gs://) at the start of a location
URI = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://([^/]*)/*(.*)$")


@dataclass(frozen=True, order=True)
class ObjectPath:
    """``<scheme>://<authority>/<key>``: the authority is the bucket (S3, GCS) or
    ``container@account.dfs.core.windows.net`` (Azure); the key has no leading or trailing ``/``."""

    scheme: str
    authority: str
    key: str = ""

    @classmethod
    def parse(cls, uri: str) -> ObjectPath:
        """
        >>> ObjectPath.parse("s3://bk/ev/").key
        'ev'
        >>> str(ObjectPath.parse("S3://bk") / "segment-logs" / "x.gz")
        's3://bk/segment-logs/x.gz'
        """
        match = URI.match(uri)
        if match is None or not match.group(2):
            raise ValueError(f"not an object store URI (scheme://bucket/prefix): {uri!r}")
        scheme, authority, key = match.groups()
        return cls(scheme.lower(), authority, _clean(key))

    def __str__(self) -> str:
        return (
            f"{self.scheme}://{self.authority}/{self.key}"
            if self.key
            else f"{self.scheme}://{self.authority}"
        )

    def __truediv__(self, part: str | PurePosixPath) -> ObjectPath:
        joined = f"{self.key}/{part}" if self.key else str(part)
        return ObjectPath(self.scheme, self.authority, _clean(joined))

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def parent(self) -> ObjectPath:
        return ObjectPath(self.scheme, self.authority, self.key.rsplit("/", 1)[0] if "/" in self.key else "")

    def with_name(self, name: str) -> ObjectPath:
        return self.parent / name

    def relative_to(self, other: ObjectPath) -> PurePosixPath:
        if (other.scheme, other.authority) != (self.scheme, self.authority) or not (
            not other.key or self.key == other.key or self.key.startswith(other.key + "/")
        ):
            raise ValueError(f"{self} is not under {other}")
        return PurePosixPath(self.key[len(other.key) :].lstrip("/") or ".")

    def as_posix(self) -> str:
        return str(self)


def _clean(key: str) -> str:
    return "/".join(p for p in key.split("/") if p not in ("", "."))


# a place in the lake: a local path or an object path
Location = Path | ObjectPath


def to_location(value: str | Path | ObjectPath) -> Location:
    """A location from its text (a manifest, a schema file, a setting): a URI or a local path."""
    if isinstance(value, (Path, ObjectPath)):
        return value
    return ObjectPath.parse(value) if URI.match(value) else Path(value)


def relative_to(path: Location, root: Location) -> PurePath:
    """``path`` relative to ``root``, both local paths or both object paths; ``ValueError`` when
    ``path`` is not under ``root`` (``Path.relative_to`` and :meth:`ObjectPath.relative_to` for
    either kind of location).

    >>> relative_to(ObjectPath.parse("s3://bk/ev/t/day=1"), ObjectPath.parse("s3://bk/ev")).as_posix()
    't/day=1'
    >>> relative_to(Path("/lake/t/day=1"), Path("/lake")).as_posix()
    't/day=1'
    """
    if isinstance(path, ObjectPath) and isinstance(root, ObjectPath):
        return path.relative_to(root)
    if not isinstance(path, ObjectPath) and not isinstance(root, ObjectPath):
        return path.relative_to(root)
    raise ValueError(f"{path} is not under {root}")


def hadoop_uri(location: str) -> str:
    """A location as Hadoop file systems (Spark, Hive) name it: S3 is ``s3a://`` (``s3://`` is
    EMRFS on EMR, and unknown elsewhere); the others are unchanged.

    >>> hadoop_uri("s3://bk/ev/segment-data")
    's3a://bk/ev/segment-data'
    """
    return "s3a://" + location[len("s3://") :] if location.startswith("s3://") else location


def uri_scheme(value: str | Path | ObjectPath) -> str:
    """``file`` for a local path, else the URI's scheme: ``uri_scheme("s3://b/p") == "s3"``."""
    if isinstance(value, ObjectPath):
        return value.scheme
    match = URI.match(str(value)) if not isinstance(value, Path) else None
    return match.group(1).lower() if match else "file"
