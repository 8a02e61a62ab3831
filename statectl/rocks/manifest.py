"""RocksDB's MANIFEST: the live files of a store read without opening it, and a MANIFEST written for a
chosen set of files (rescale's key-group path: a target store made of server-side copies of source files).

A MANIFEST is a RocksDB log (db/log_format.h: 32 KiB blocks of records, each with a masked CRC32C, a
length and a type; a record larger than a block's rest is split into FIRST/MIDDLE/LAST fragments) of
VersionEdits (db/version_edit.cc: tagged fields, varints and length-prefixed slices). Replaying the edits
gives the live SST files of each level: their number, size, smallest and largest internal keys and
sequence numbers, the same as ``rocksdict.Rdict.live_files()`` of the open store.

:func:`write_manifest` writes one VersionEdit that adds the given files (kNewFile4, each with an explicit
epoch number so that L0's order is the caller's), with the comparator, log number 0 (no WAL), the next
file number and the last sequence; RocksDB opens a dir holding it, CURRENT and the files as a store.
Only the default column family and no blob files: a store with others is refused (ManifestError).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

BLOCK_SIZE = 32768
HEADER_SIZE = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
RECYCLABLE = (5, 6, 7, 8)

# VersionEdit tags (db/version_edit.h, enum Tag)
COMPARATOR, LOG_NUMBER, NEXT_FILE_NUMBER, LAST_SEQUENCE, COMPACT_CURSOR, DELETED_FILE, NEW_FILE = 1, 2, 3, 4, 5, 6, 7
PREV_LOG_NUMBER, MIN_LOG_NUMBER_TO_KEEP = 9, 10
NEW_FILE2, NEW_FILE3, NEW_FILE4 = 100, 102, 103
COLUMN_FAMILY, COLUMN_FAMILY_ADD, COLUMN_FAMILY_DROP, MAX_COLUMN_FAMILY = 200, 201, 202, 203
IN_ATOMIC_GROUP = 300
BLOB_FILE_ADDITION, BLOB_FILE_GARBAGE = 400, 401
TAG_SAFE_IGNORE_MASK = 1 << 13  # a tag from the future with this bit: a length-prefixed slice, ignorable

# NewFile4 custom tags (enum NewFileCustomTag)
CT_TERMINATE, CT_OLDEST_BLOB_FILE_NUMBER, CT_EPOCH_NUMBER, CT_PATH_ID = 1, 4, 13, 65
CT_NON_SAFE_IGNORE_MASK = 1 << 6
# custom fields copied into a written MANIFEST as they were (the others describe the old store's history)
KEPT_CUSTOM = frozenset({5, 6, 7, 8, 9, 12, 14, 15})  # ancester time, creation time, checksum (+func), temperature, unique id, range-del size, tail size

BYTEWISE = b"leveldb.BytewiseComparator"

# The value type of an internal key that bounds a range deletion (dbformat.h, kTypeRangeDeletion), and the
# trailer of a range deletion's end as a file's largest key: the largest sequence number with that type
# (InternalKey::IsRangeTombstoneSentinel), which makes the end exclusive.
RANGE_DELETION = 0x0F
RANGE_DELETION_SENTINEL = struct.pack("<Q", ((1 << 56) - 1) << 8 | RANGE_DELETION)


class ManifestError(ValueError):
    """A MANIFEST that cannot be read (damaged, truncated) or describes what statectl does not handle."""


@dataclass(frozen=True)
class LiveFile:
    """One live SST file of a store: ``smallest``/``largest`` are internal keys (user key + 8 bytes of
    sequence number and type); ``custom`` the NewFile4 custom fields (tag -> value) worth keeping."""

    number: int
    level: int
    size: int
    smallest: bytes
    largest: bytes
    smallest_seqno: int
    largest_seqno: int
    epoch: int = 0
    custom: tuple[tuple[int, bytes], ...] = ()

    @property
    def name(self) -> str:
        return f"{self.number:06d}.sst"

    @property
    def smallest_key(self) -> bytes:
        return self.smallest[:-8]

    @property
    def largest_key(self) -> bytes:
        return self.largest[:-8]

    @property
    def end_exclusive(self) -> bool:
        """Whether ``largest`` is a range deletion's end, which the file's keys stay below."""
        return self.largest[-8:] == RANGE_DELETION_SENTINEL

    @property
    def bounded_by_range_deletion(self) -> bool:
        """Whether either bound is a range deletion's, not a key the store's writer wrote."""
        return self.smallest[-8] == RANGE_DELETION or self.largest[-8] == RANGE_DELETION

    def meets(self, start: bytes, end: bytes) -> bool:
        """Whether the file's key range reaches into the key range [start, end)."""
        return self.smallest_key < end and (self.largest_key > start if self.end_exclusive
                                            else self.largest_key >= start)


@dataclass
class Manifest:
    """The state a MANIFEST's edits add up to (default column family)."""

    comparator: bytes = b""
    log_number: int = 0
    next_file_number: int = 0
    last_sequence: int = 0
    files: dict[int, LiveFile] = field(default_factory=dict)

    @property
    def live_files(self) -> list[LiveFile]:
        """By level, then smallest key (L0: newest first, as RocksDB reads it)."""
        l0 = sorted((f for f in self.files.values() if f.level == 0), key=lambda f: (-f.epoch, -f.largest_seqno))
        rest = sorted((f for f in self.files.values() if f.level > 0), key=lambda f: (f.level, f.smallest_key))
        return l0 + rest


# -- CRC32C (masked, as RocksDB's log records carry it) ----------------------------------------------------

def _crc_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc_table()


def crc32c(data: bytes, crc: int = 0) -> int:
    crc ^= 0xFFFFFFFF
    t = _TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _mask(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# -- varints -------------------------------------------------------------------------------------------------

class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def varint(self) -> int:
        out = shift = 0
        while True:
            if self.pos >= len(self.data) or shift > 63:
                raise ManifestError("a VersionEdit ends inside a varint")
            b = self.data[self.pos]
            self.pos += 1
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7

    def slice(self) -> bytes:
        n = self.varint()
        if self.pos + n > len(self.data):
            raise ManifestError("a VersionEdit ends inside a slice")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    @property
    def done(self) -> bool:
        return self.pos >= len(self.data)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _slice(b: bytes) -> bytes:
    return _varint(len(b)) + b


# -- the log ------------------------------------------------------------------------------------------------

def _records(data: bytes) -> list[bytes]:
    """The records of a RocksDB log; a damaged record is a ManifestError, a torn tail (a crash while
    RocksDB appended) ends the log as RocksDB's recovery ends it."""
    out: list[bytes] = []
    pending: bytearray | None = None
    pos = 0
    while pos < len(data):
        left = BLOCK_SIZE - pos % BLOCK_SIZE
        if left < HEADER_SIZE:
            pos += left  # the block's trailer
            continue
        if pos + HEADER_SIZE > len(data):
            break  # torn header at the end
        crc, length, kind = struct.unpack_from("<IHB", data, pos)
        if kind == 0 and length == 0 and crc == 0:
            pos += left  # preallocated zeros up to the block's end
            continue
        if kind in RECYCLABLE:
            raise ManifestError("a recyclable log record in a MANIFEST")
        start = pos + HEADER_SIZE
        if start + length > len(data):
            break  # torn record at the end
        payload = data[start:start + length]
        if _mask(crc32c(bytes([kind]) + payload)) != crc:
            if start + length == len(data):
                break
            raise ManifestError(f"checksum mismatch in the record at byte {pos}")
        pos = start + length
        if kind == FULL:
            out.append(payload)
            pending = None
        elif kind == FIRST:
            pending = bytearray(payload)
        elif kind in (MIDDLE, LAST):
            if pending is None:
                raise ManifestError(f"a record fragment without its first part at byte {pos}")
            pending += payload
            if kind == LAST:
                out.append(bytes(pending))
                pending = None
        else:
            raise ManifestError(f"unknown log record type {kind} at byte {pos}")
    return out


def _log(records: list[bytes]) -> bytes:
    out = bytearray()
    for rec in records:
        first = True
        rest = rec
        while True:
            left = BLOCK_SIZE - len(out) % BLOCK_SIZE
            if left < HEADER_SIZE:
                out += b"\0" * left
                left = BLOCK_SIZE
            n = min(len(rest), left - HEADER_SIZE)
            last = n == len(rest)
            kind = FULL if first and last else FIRST if first else LAST if last else MIDDLE
            part = rest[:n]
            out += struct.pack("<IHB", _mask(crc32c(bytes([kind]) + part)), n, kind) + part
            rest = rest[n:]
            first = False
            if last:
                break
    return bytes(out)


# -- reading ------------------------------------------------------------------------------------------------

def _new_file(r: _Reader, tag: int) -> tuple[int, LiveFile]:
    level = r.varint()
    number = r.varint()
    if tag == NEW_FILE3:
        if r.varint() != 0:
            raise ManifestError("an SST file on a second db path")
    size = r.varint()
    smallest, largest = r.slice(), r.slice()
    sseq = lseq = 0
    if tag != NEW_FILE:
        sseq, lseq = r.varint(), r.varint()
    epoch = 0
    custom: list[tuple[int, bytes]] = []
    if tag == NEW_FILE4:
        while True:
            ct = r.varint()
            if ct == CT_TERMINATE:
                break
            value = r.slice()
            if ct == CT_EPOCH_NUMBER:
                epoch = _Reader(value).varint()
            elif ct == CT_OLDEST_BLOB_FILE_NUMBER:
                if _Reader(value).varint() != 0:
                    raise ManifestError("the store has blob files (BlobDB), which statectl does not handle")
            elif ct == CT_PATH_ID:
                if _Reader(value).varint() != 0:
                    raise ManifestError("an SST file on a second db path")
            elif ct in KEPT_CUSTOM:
                custom.append((ct, value))
            elif ct & CT_NON_SAFE_IGNORE_MASK:
                raise ManifestError(f"an SST file field statectl does not know (custom tag {ct})")
    if len(smallest) < 8 or len(largest) < 8:
        raise ManifestError(f"SST {number} has a key range that is not internal keys")
    return level, LiveFile(number, level, size, smallest, largest, sseq, lseq, epoch, tuple(custom))


def read_manifest(data: bytes) -> Manifest:
    """Replay a MANIFEST's bytes. ManifestError for a damaged MANIFEST, column families other than the
    default holding files, blob files, or a field RocksDB marks as not safe to ignore that statectl does
    not know."""
    m = Manifest()
    for rec in _records(data):
        edit = _read_edit(rec)
        if edit.cf != 0:
            if edit.adds:
                raise ManifestError("the store has column families besides the default one, which statectl's "
                                    "rescale does not handle")
            continue
        if "comparator" in edit.fields:
            m.comparator = edit.fields["comparator"]  # type: ignore[assignment]
        for key in ("log_number", "next_file_number", "last_sequence"):
            if key in edit.fields:
                setattr(m, key, edit.fields[key])
        for number in edit.deletes:
            m.files.pop(number, None)
        for f in edit.adds:
            m.files[f.number] = f
    if not m.next_file_number:
        raise ManifestError("the MANIFEST has no next file number (not a RocksDB MANIFEST, or empty)")
    return m


@dataclass
class _Edit:
    """One VersionEdit record: its column family, the files it adds and deletes, and the fields it sets."""

    cf: int = 0
    adds: list[LiveFile] = field(default_factory=list)
    deletes: list[int] = field(default_factory=list)
    fields: dict[str, int | bytes] = field(default_factory=dict)


_NUMBERS = {LOG_NUMBER: "log_number", NEXT_FILE_NUMBER: "next_file_number", LAST_SEQUENCE: "last_sequence"}


def _read_edit(rec: bytes) -> _Edit:
    """Parse one VersionEdit (RocksDB's VersionEdit::DecodeFrom, the tags statectl needs)."""
    r = _Reader(rec)
    edit = _Edit()
    while not r.done:
        tag = r.varint()
        if tag == COMPARATOR:
            edit.fields["comparator"] = r.slice()
        elif tag in (LOG_NUMBER, NEXT_FILE_NUMBER, LAST_SEQUENCE, PREV_LOG_NUMBER, MIN_LOG_NUMBER_TO_KEEP):
            v = r.varint()
            if tag in _NUMBERS:
                edit.fields[_NUMBERS[tag]] = v
        elif tag == COMPACT_CURSOR:
            r.varint()
            r.slice()
        elif tag == DELETED_FILE:
            r.varint()
            edit.deletes.append(r.varint())
        elif tag in (NEW_FILE, NEW_FILE2, NEW_FILE3, NEW_FILE4):
            edit.adds.append(_new_file(r, tag)[1])
        elif tag in (COLUMN_FAMILY, MAX_COLUMN_FAMILY, IN_ATOMIC_GROUP):
            v = r.varint()
            if tag == COLUMN_FAMILY:
                edit.cf = v
        elif tag == COLUMN_FAMILY_ADD:
            r.slice()
        elif tag == COLUMN_FAMILY_DROP:
            pass
        elif tag in (BLOB_FILE_ADDITION, BLOB_FILE_GARBAGE):
            raise ManifestError("the store has blob files (BlobDB), which statectl does not handle")
        elif tag & TAG_SAFE_IGNORE_MASK:
            r.slice()
        else:
            raise ManifestError(f"a MANIFEST field statectl does not know (tag {tag})")
    return edit


def read_store_manifest(store: Path) -> Manifest:
    """The Manifest of the store dir ``store`` (its CURRENT names the MANIFEST)."""
    current = (Path(store) / "CURRENT").read_text().strip()
    if not current.startswith("MANIFEST-") or "/" in current:
        raise ManifestError(f"CURRENT of {store} names {current!r}, not a MANIFEST")
    return read_manifest((Path(store) / current).read_bytes())


# -- writing ------------------------------------------------------------------------------------------------

def manifest_bytes(files: list[LiveFile], *, next_file_number: int, last_sequence: int,
                   comparator: bytes = BYTEWISE) -> bytes:
    """A MANIFEST adding ``files`` (their numbers, levels, key ranges, sequence numbers and epochs as
    given; the kept custom fields as read) to an empty default column family, with log number 0. The
    caller keeps each level above 0 free of overlapping key ranges and numbers below
    ``next_file_number``."""
    edit = bytearray()
    edit += _varint(COMPARATOR) + _slice(comparator)
    edit += _varint(LOG_NUMBER) + _varint(0)
    edit += _varint(NEXT_FILE_NUMBER) + _varint(next_file_number)
    edit += _varint(LAST_SEQUENCE) + _varint(last_sequence)
    for f in files:
        if f.number >= next_file_number:
            raise ValueError(f"file number {f.number} is not below the next file number {next_file_number}")
        edit += _varint(NEW_FILE4) + _varint(f.level) + _varint(f.number) + _varint(f.size)
        edit += _slice(f.smallest) + _slice(f.largest) + _varint(f.smallest_seqno) + _varint(f.largest_seqno)
        for tag, value in f.custom:
            edit += _varint(tag) + _slice(value)
        if f.epoch:
            edit += _varint(CT_EPOCH_NUMBER) + _slice(_varint(f.epoch))
        edit += _varint(CT_TERMINATE)
    return _log([bytes(edit)])


def write_store_files(store: Path, manifest: bytes, number: int) -> list[Path]:
    """Write ``manifest`` as ``MANIFEST-<number>`` into ``store`` with the CURRENT that names it; return
    the two paths."""
    store = Path(store)
    name = f"MANIFEST-{number:06d}"
    (store / name).write_bytes(manifest)
    (store / "CURRENT").write_text(name + "\n")
    return [store / name, store / "CURRENT"]


def external_file(number: int, level: int, size: int, smallest_key: bytes, largest_key: bytes,
                  epoch: int = 0) -> LiveFile:
    """The LiveFile of an SST written by SstFileWriter (all its entries at sequence number 0), for a
    MANIFEST that lists it at ``level``: internal keys with sequence 0 and the widest type (RocksDB's
    ingestion marks them the same way)."""
    return LiveFile(number, level, size, smallest_key + struct.pack("<Q", 0x1 | (0 << 8)),
                    largest_key + struct.pack("<Q", 0x1 | (0 << 8)), 0, 0, epoch)
