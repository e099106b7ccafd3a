"""The dedupe index's key files (``*.keys``): one module reads and writes them.

A message id is keyed by its 128-bit BLAKE2b hash (``hi``, ``lo``: two unsigned 64-bit halves). No
full id is kept: a lookup of k ids against n keys matches a wrong id with probability k·n/2^128 (a
batch of 2,000 ids against 1.2 billion keys: 7·10^-27; a year of such batches: 10^-20), far below
the odds of a disk or memory corrupting the id itself, and a 16-byte key instead of a 36-byte
UUID (plus its offsets) keeps a busy source's index at 24 bytes an id.

A file is its records (``hi``, ``lo``, ``at``: the received time in µs since 1970, UTC), sorted
by key, then a directory, then a filter, then a trailer:

- records: ``count`` × 24 bytes, little-endian;
- directory: ``2^bits + 1`` little-endian uint64, the first record of each bucket (the keys whose
  top ``bits`` bits are the bucket's number), the last one ``count``; ``bits`` gives buckets of
  about 128 to 256 records (3 to 6 KB);
- filter: a blocked Bloom filter of the keys, ``blocks`` × 64 bytes (about
  :data:`FILTER_BITS_PER_KEY` bits a key): a key sets :data:`FILTER_PROBES` bits (9 bits of ``lo``
  each) of one 512-bit block (chosen by the top 32 bits of ``hi``, so sorted keys fill the blocks in
  order); about 1% of the keys a file does not hold pass it;
- trailer (:data:`TRAILER`): magic, ``bits``, ``count``, the least and greatest ``at``, ``blocks``,
  magic. Files written before the filter (:data:`TRAILER_V1`, magic ``ELDEDUP1``) have neither the
  filter nor ``blocks``; they are read as before (a lookup reads their buckets) until a merge
  writes them into a file with a filter or they leave the dedupe window.

A lookup reads the trailer, the filter's blocks of its keys (a 64-byte block each; mapped in
memory on a local disk) and, for the keys the filter passes only, the directory entries of their
buckets and those buckets: a batch of ids that are new (nearly all of them) reads about 64 bytes an
id of each file instead of a bucket (4 KB), and the filters (1.25 bytes a key, 5% of the index)
stay in the page cache where the records would not (:func:`lookup`). A merge reads each input a
range of buckets at a time (:func:`records_in`).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa

from eventlake.storage import FileInfo, Storage
from eventlake.storage.local import write_atomic

SUFFIX = ".keys"
RECORD = np.dtype([("hi", "<u8"), ("lo", "<u8"), ("at", "<i8")])
TRAILER = struct.Struct("<8sQQqqQ8s")
MAGIC = b"ELDEDUP2"
TRAILER_V1 = struct.Struct("<8sQQqq8s")  # files written before the filter
MAGIC_V1 = b"ELDEDUP1"
FILTER_BITS_PER_KEY = 10  # with 7 probes in a 512-bit block: about 1% of absent keys pass
FILTER_PROBES = 7
FILTER_BLOCK = 64  # bytes (512 bits: one cache line)
FILTER_CHUNK = 1_000_000  # keys set or tested at a time (bounded memory: ~64 MB of blocks)
FILTER_READ_BYTES = 1024 * 1024  # on an object store without local copies: filters read whole up to this
BUCKET_RECORDS = 256  # a bucket holds at most about this many records on average (3 to 6 KB)
SPAN_GAP = 8 * 1024  # a lookup reads buckets closer than this in one range ...
SPAN_BYTES = 64 * 1024 * 1024  # ... and at most this much at once


class IndexFileError(ValueError):
    """A key file that is not whole (cut short, or not a key file at all)."""


def keys(message_ids: Sequence[str] | pa.Array) -> np.ndarray:
    """The records of ``message_ids`` (``at`` zero), in their order.

    >>> digest = hashlib.blake2b(b"m1", digest_size=16).digest()
    >>> int(keys(["m1"])["hi"][0]) == int.from_bytes(digest[:8], "big")
    True
    """
    ids = message_ids.to_pylist() if isinstance(message_ids, pa.Array) else message_ids
    digests = b"".join(hashlib.blake2b(i.encode(), digest_size=16).digest() for i in ids)
    halves = np.frombuffer(digests, dtype=">u8").reshape(-1, 2)
    records = np.zeros(len(ids), RECORD)
    records["hi"], records["lo"] = halves[:, 0], halves[:, 1]
    return records


def records_of(message_ids: pa.Array, received_at: pa.Array) -> np.ndarray:
    """The records of ids and their received times (an Arrow timestamp column, any unit)."""
    records = keys(message_ids)
    micros = received_at.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    records["at"] = micros.to_numpy(zero_copy_only=False)
    return records


def sort_unique(records: np.ndarray) -> np.ndarray:
    """``records`` sorted by key then time, each (key, time) once."""
    ordered = records[np.lexsort((records["at"], records["lo"], records["hi"]))]
    if len(ordered) < 2:
        return ordered
    same = (
        (ordered["hi"][1:] == ordered["hi"][:-1])
        & (ordered["lo"][1:] == ordered["lo"][:-1])
        & (ordered["at"][1:] == ordered["at"][:-1])
    )
    return ordered[np.concatenate(([True], ~same))]


def bucket_bits(count: int) -> int:
    """Buckets for ``count`` records: the least power of two that keeps them under
    :data:`BUCKET_RECORDS` on average.

    >>> bucket_bits(0), bucket_bits(255), bucket_bits(256), bucket_bits(172_800_000)
    (0, 0, 1, 20)
    """
    return min(max(0, (count // BUCKET_RECORDS).bit_length()), 32)


def buckets(hi: np.ndarray, bits: int) -> np.ndarray:
    return hi >> np.uint64(64 - bits) if bits else np.zeros(len(hi), np.uint64)


class KeyWriter:
    """Writes sorted records, chunk by chunk (each chunk's keys after the previous chunk's), to a
    handle, building the directory as it goes; :meth:`close` writes the directory and trailer."""

    def __init__(self, handle: BinaryIO, expected: int) -> None:
        self.handle, self.bits = handle, bucket_bits(expected)
        self.starts = np.zeros(2**self.bits + 1, np.uint64)  # counts per bucket, then their sums
        self.count, self.least, self.most = 0, np.iinfo(np.int64).max, np.iinfo(np.int64).min
        self.blocks = filter_blocks(expected)  # held until the end: 1.25 bytes a key
        self.filter = np.zeros(self.blocks * FILTER_BLOCK, np.uint8)

    def add(self, records: np.ndarray) -> None:
        if not len(records):
            return
        self.handle.write(records.astype(RECORD, copy=False).tobytes())
        self.starts[1:] += np.bincount(buckets(records["hi"], self.bits), minlength=2**self.bits).astype(
            np.uint64
        )
        self.count += len(records)
        _set_filter(self.filter, self.blocks, records)
        self.least, self.most = (
            min(self.least, int(records["at"].min())),
            max(self.most, int(records["at"].max())),
        )

    def close(self) -> None:
        self.handle.write(np.cumsum(self.starts, dtype=np.uint64).astype("<u8").tobytes())
        self.handle.write(self.filter.tobytes())
        self.handle.write(
            TRAILER.pack(MAGIC, self.bits, self.count, self.least, self.most, self.blocks, MAGIC)
        )


def write_keys(handle: BinaryIO, records: np.ndarray) -> None:
    """A key file of ``records`` (sorted and made unique here)."""
    records = sort_unique(records)
    writer = KeyWriter(handle, len(records))
    writer.add(records)
    writer.close()


@dataclass(frozen=True)
class KeyFile:
    """A key file's trailer: where its parts are."""

    info: FileInfo
    bits: int
    count: int
    least: int  # the least and greatest received time (µs); a file with no records has least > most
    most: int
    blocks: int = 0  # the filter's (0: a file written before the filter)

    @property
    def directory(self) -> int:
        return self.count * RECORD.itemsize

    @property
    def filter_at(self) -> int:
        return self.directory + (int(2**self.bits) + 1) * 8

    def may_hold(self, storage: Storage, wanted: np.ndarray, filters: Path | None = None) -> np.ndarray:
        """Which of ``wanted`` (records) the filter passes (all of them when the file has none).

        On a local disk the filter is mapped. On an object store it is read from its copy in the
        folder ``filters`` (:func:`eventlake.state_layout.dedupe_filter_dir`; fetched whole the first time,
        a key file never changes); without that folder, a filter of at most
        :data:`FILTER_READ_BYTES` is read whole and a bigger one is not used (ranged reads of
        64-byte blocks scattered over hundreds of MB would cost more than the buckets)."""
        if not self.blocks:
            return np.ones(len(wanted), bool)
        size, shape = self.blocks * FILTER_BLOCK, (self.blocks, FILTER_BLOCK)
        local = storage.local_path(self.info.path)
        table: np.ndarray
        if local is not None:  # mapped: the blocks asked for are read from the page cache
            table = np.memmap(local, np.uint8, "r", self.filter_at, shape)
        elif filters is not None:
            table = np.memmap(self._local_copy(storage, filters), np.uint8, "r", 0, shape)
        elif size <= FILTER_READ_BYTES:
            [data] = storage.read_ranges(self.info.path, [(self.filter_at, size)])
            table = np.frombuffer(data, np.uint8).reshape(-1, FILTER_BLOCK)
        else:
            return np.ones(len(wanted), bool)
        passed = np.zeros(len(wanted), bool)
        for first in range(0, len(wanted), FILTER_CHUNK):
            part = wanted[first : first + FILTER_CHUNK]
            rows = np.asarray(table[_filter_block(part["hi"], self.blocks).astype(np.int64)])
            probes = _filter_probes(part["lo"])
            held = np.take_along_axis(rows, (probes >> 3).astype(np.int64), axis=1)
            passed[first : first + len(part)] = ((held >> (probes & 7).astype(np.uint8)) & 1).all(axis=1)
        del table
        return passed

    def _local_copy(self, storage: Storage, filters: Path) -> Path:
        """The filter's copy in ``filters`` (written whole under an unpredictable temporary name,
        then renamed: :func:`~eventlake.storage.local.write_atomic`)."""
        path = filters / filter_copy_name(self.info)
        if not path.exists() or path.stat().st_size != self.blocks * FILTER_BLOCK:
            [data] = storage.read_ranges(self.info.path, [(self.filter_at, self.blocks * FILTER_BLOCK)])
            filters.mkdir(parents=True, exist_ok=True)
            write_atomic(path, data)
        return path

    def entries(self, storage: Storage, numbers: np.ndarray) -> np.ndarray:
        """The directory's entries ``numbers`` (sorted, unique): where those buckets start."""
        if len(numbers) * 64 > 2**self.bits:  # most of them: the whole directory in one read
            [data] = storage.read_ranges(self.info.path, [(self.directory, (2**self.bits + 1) * 8)])
            return np.frombuffer(data, "<u8")[numbers.astype(np.int64)]
        ranges = [(self.directory + 8 * int(n), 8) for n in numbers]
        return np.frombuffer(b"".join(storage.read_ranges(self.info.path, ranges)), "<u8")

    def records(self, storage: Storage, spans: Sequence[tuple[int, int]]) -> np.ndarray:
        """The records of these ``(first, end)`` spans of records, in order."""
        size = RECORD.itemsize
        data = storage.read_ranges(
            self.info.path, [(first * size, (end - first) * size) for first, end in spans]
        )
        return np.frombuffer(b"".join(data), RECORD)


def open_keys(storage: Storage, info: FileInfo) -> KeyFile:
    """The trailer of a key file (:class:`IndexFileError` when the file is not whole)."""
    [tail] = storage.read_ranges(info.path, [(max(0, info.size - TRAILER.size), TRAILER.size)])
    if len(tail) < TRAILER_V1.size:
        raise IndexFileError(f"{info.path}: not a dedupe key file ({info.size} bytes)")
    expected, blocks = -1, 0
    if tail[-8:] == MAGIC and len(tail) == TRAILER.size:
        magic, bits, count, least, most, blocks, _ = TRAILER.unpack(tail)
        ends = TRAILER.size
    else:  # a file written before the filter (or not a whole file: refused below)
        magic, bits, count, least, most, _ = TRAILER_V1.unpack(tail[-TRAILER_V1.size :])
        ends = TRAILER_V1.size
    if magic == tail[-8:] and magic in (MAGIC, MAGIC_V1) and bits <= 32:
        expected = count * RECORD.itemsize + (2**bits + 1) * 8 + blocks * FILTER_BLOCK + ends
    if expected != info.size:
        raise IndexFileError(
            f"{info.path}: not a whole dedupe key file ({info.size} bytes): "
            "delete it; the next sync of its run's archive files is not affected, a resent copy of "
            "its ids is no longer dropped"
        )
    return KeyFile(info, bits, count, least, most, blocks)


def lookup(
    storage: Storage, file: KeyFile, wanted: np.ndarray, since: int, until: int | None,
    *, filters: Path | None = None,
) -> np.ndarray:  # fmt: skip
    """Which of ``wanted`` (records sorted by key) the file holds with a time at or after
    ``since`` and before ``until`` (µs), as a boolean mask: its filter is asked first
    (:meth:`KeyFile.may_hold`; ``filters``: where the filters' local copies are kept on an object
    store), then the buckets of the keys it passes are read (:func:`lookup_buckets`)."""
    if not file.blocks or not _may_match(file, wanted, since, until):  # no filter: every key's bucket
        return lookup_buckets(storage, file, wanted, since, until)
    found = np.zeros(len(wanted), bool)
    passed = file.may_hold(storage, wanted, filters)
    found[passed] = lookup_buckets(storage, file, wanted[passed], since, until)
    return found


def lookup_buckets(
    storage: Storage, file: KeyFile, wanted: np.ndarray, since: int, until: int | None
) -> np.ndarray:
    """:func:`lookup` without the filter: the buckets of every key of ``wanted`` are read, at most
    :data:`SPAN_BYTES` at a time."""
    found = np.zeros(len(wanted), bool)
    if not _may_match(file, wanted, since, until):
        return found
    numbers = np.unique(buckets(wanted["hi"], file.bits))
    bounds = file.entries(storage, np.unique(np.concatenate((numbers, numbers + 1))))
    at = {int(n): i for i, n in enumerate(np.unique(np.concatenate((numbers, numbers + 1))))}
    spans = _spans([(int(bounds[at[int(n)]]), int(bounds[at[int(n) + 1]])) for n in numbers])
    for window in _windows(spans):
        records = file.records(storage, window)
        first = np.searchsorted(wanted["hi"], records["hi"][0], "left")
        end = np.searchsorted(wanted["hi"], records["hi"][-1], "right")
        found[first:end] |= _matches(records, wanted[first:end], since, until)
    return found


def _may_match(file: KeyFile, wanted: np.ndarray, since: int, until: int | None) -> bool:
    """Whether the file may hold any of ``wanted`` in the time range (its keys' times span it)."""
    return (
        bool(len(wanted))
        and bool(file.count)
        and file.most >= since
        and (until is None or file.least < until)
    )


def records_in(storage: Storage, file: KeyFile, part: int, parts_bits: int) -> np.ndarray:
    """The file's records whose keys' top ``parts_bits`` bits are ``part`` (a merge's share)."""
    if not file.count:
        return np.zeros(0, RECORD)
    if file.bits >= parts_bits:
        shift = file.bits - parts_bits
        first, end = file.entries(storage, np.array([part << shift, (part + 1) << shift]))
        return file.records(storage, [(int(first), int(end))]) if end > first else np.zeros(0, RECORD)
    bucket = part >> (parts_bits - file.bits)  # a small file: its bucket holds several parts
    first, end = file.entries(storage, np.array([bucket, bucket + 1]))
    records = file.records(storage, [(int(first), int(end))]) if end > first else np.zeros(0, RECORD)
    mine: np.ndarray = records[buckets(records["hi"], parts_bits) == part]
    return mine


def filter_copy_name(info: FileInfo) -> str:
    """The name of a key file's filter copy: a digest of its path, and its size."""
    digest = hashlib.blake2b(str(info.path).encode(), digest_size=10).hexdigest()
    return f"{digest}-{info.size}.filter"


def drop_filter_copies(filters: Path, kept: Iterable[FileInfo]) -> None:
    """Delete the copies in ``filters`` but those of the ``kept`` key files (the window's)."""
    names = {filter_copy_name(info) for info in kept}
    if filters.is_dir():
        for path in filters.iterdir():
            if path.name not in names and not path.name.startswith("."):
                path.unlink(missing_ok=True)


def filter_blocks(count: int) -> int:
    """The filter's 64-byte blocks for ``count`` keys (about :data:`FILTER_BITS_PER_KEY` bits each).

    >>> filter_blocks(0), filter_blocks(1), filter_blocks(172_800_000)
    (0, 1, 3375000)
    """
    return -(-count * FILTER_BITS_PER_KEY // (FILTER_BLOCK * 8))


def _filter_block(hi: np.ndarray, blocks: int) -> np.ndarray:
    """The block of each key: the top 32 bits of ``hi`` scaled to ``blocks`` (in key order)."""
    return ((hi >> np.uint64(32)) * np.uint64(blocks)) >> np.uint64(32)


def _filter_probes(lo: np.ndarray) -> np.ndarray:
    """The bits each key sets in its block: :data:`FILTER_PROBES` slices of 9 bits of ``lo``."""
    shifts = np.arange(FILTER_PROBES, dtype=np.uint64) * np.uint64(9)
    probes: np.ndarray = (lo[:, None] >> shifts) & np.uint64(FILTER_BLOCK * 8 - 1)
    return probes


def _set_filter(table: np.ndarray, blocks: int, records: np.ndarray) -> None:
    """Sets the bits of ``records`` (sorted by key) in the filter ``table``: a chunk of keys spans a
    range of blocks, set in a bit array of that range, then packed and or-ed in."""
    for start in range(0, len(records) if blocks else 0, FILTER_CHUNK):
        chunk = records[start : start + FILTER_CHUNK]
        numbers = _filter_block(chunk["hi"], blocks).astype(np.int64)
        first, last = int(numbers.min()), int(numbers.max())
        bits = np.zeros((last - first + 1) * FILTER_BLOCK * 8, bool)
        probes = _filter_probes(chunk["lo"]).astype(np.int64)
        bits[((numbers - first)[:, None] * (FILTER_BLOCK * 8) + probes).ravel()] = True
        table[first * FILTER_BLOCK : (last + 1) * FILTER_BLOCK] |= np.packbits(bits, bitorder="little")


def _spans(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Record ranges (sorted) joined when fewer than :data:`SPAN_GAP` bytes apart."""
    gap = SPAN_GAP // RECORD.itemsize
    spans: list[tuple[int, int]] = []
    for first, end in ranges:
        if end <= first:
            continue
        if spans and first - spans[-1][1] < gap:
            spans[-1] = (spans[-1][0], end)
        else:
            spans.append((first, end))
    return spans


def _windows(spans: list[tuple[int, int]]) -> Iterable[list[tuple[int, int]]]:
    """The spans in groups of at most :data:`SPAN_BYTES` (a span bigger than that on its own)."""
    most, size = SPAN_BYTES // RECORD.itemsize, 0
    window: list[tuple[int, int]] = []
    for first, end in spans:
        if window and size + end - first > most:
            yield window
            window, size = [], 0
        window.append((first, end))
        size += end - first
    if window:
        yield window


def _matches(records: np.ndarray, wanted: np.ndarray, since: int, until: int | None) -> np.ndarray:
    """Which ``wanted`` keys are among ``records`` (sorted, each bucket whole) in the time range."""
    left = np.searchsorted(records["hi"], wanted["hi"], "left")
    right = np.searchsorted(records["hi"], wanted["hi"], "right")
    lengths = right - left
    found = np.zeros(len(wanted), bool)
    if not lengths.any():
        return found
    owner = np.repeat(np.arange(len(wanted)), lengths)  # one row per candidate (same top 64 bits)
    position = np.repeat(left, lengths) + (
        np.arange(len(owner)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    )
    candidate = records[position]
    hit = (candidate["lo"] == wanted["lo"][owner]) & (candidate["at"] >= since)
    if until is not None:
        hit &= candidate["at"] < until
    found[owner[hit]] = True
    return found
