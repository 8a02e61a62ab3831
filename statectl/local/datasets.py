"""File datasets as rows (dicts, column -> value) for the put path of ``adstore load --from-file``:
Parquet (pyarrow, imported inside functions), JSON lines, CSV. A dir is read file by file in name order,
skipping hidden files, Spark's markers (``_SUCCESS``, ``_*``) and files not named as the format's
(``.parquet``; ``.jsonl``, ``.json``, ``.ndjson``; ``.csv``).

The rows are what the Spark path's readers give (statectl.spark.sources), so both build the same store:
Parquet rows as pyarrow's ``to_pylist`` (nested structs as dicts); JSON lines as ``json.loads`` of each
non-blank line (an object); CSV with a header row, every value a string, an empty field None (Spark reads
an empty field as null).

A file that changes while it is read (another process still writing it, truncating or replacing it) is an
error, never a silently different version: each file's device, inode, size and mtime (ns) are taken before
it is read and compared after (:func:`stamps`, :func:`check_unchanged` do the same around a Spark build).
A change that keeps all four (the same size, within the filesystem's mtime granularity) is not seen.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from statectl.errors import MissingDependencyError, NotFoundError, StatectlError, UsageError
from statectl.formats.adstore import ExtractError, jsonl_row

FORMATS = ("parquet", "jsonl", "csv")
_BY_SUFFIX = {".parquet": "parquet", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}
_PARQUET_BATCH_ROWS = 65_536
PARQUET_HINT = "pip install 'statectl[parquet]' (pyarrow), or build with --spark"


class DatasetError(StatectlError):
    """A file that is not what its format says (the message names the file and the line or row)."""


@dataclass(frozen=True)
class Dataset:
    path: Path
    fmt: str
    files: tuple[Path, ...]


def open_dataset(path: Path, fmt: str | None = None) -> Dataset:
    """The files of the dataset at ``path`` (a file or a dir) and its format (``fmt``, else from the file
    suffixes). Raises NotFoundError when there is nothing there, UsageError when the format is unknown."""
    path = Path(path)
    if not path.exists():
        raise NotFoundError(f"dataset {path} does not exist")
    if path.is_dir():
        files = tuple(sorted(p for p in path.rglob("*") if p.is_file() and not any(
            part.startswith((".", "_")) for part in p.relative_to(path).parts)))
    else:
        files = (path,)
    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}", hint=f"one of {', '.join(FORMATS)}")
    if fmt is None:
        found = {_BY_SUFFIX.get(p.suffix.lower()) for p in files}
        found.discard(None)
        if len(found) != 1:
            raise UsageError(f"cannot tell the format of {path} from its file names", hint="pass --format "
                             + "|".join(FORMATS))
        fmt = found.pop()
    if path.is_dir():  # only the format's files: a README or a checksum file beside them is not data
        files = tuple(p for p in files if _BY_SUFFIX.get(p.suffix.lower()) == fmt)
    if not files:
        raise NotFoundError(f"dataset {path} holds no {fmt} files")
    return Dataset(path, fmt, files)


def iter_rows(ds: Dataset) -> Iterator[tuple[Path, int, dict[str, Any]]]:
    """(file, row number from 1, row) of every row, file by file. Raises DatasetError naming the file when
    it is gone, or changed (device, inode, size or mtime) between the start and the end of its reading."""
    for f in ds.files:
        before = _stamp(f)
        if ds.fmt == "parquet":
            yield from _parquet(f)
        elif ds.fmt == "jsonl":
            yield from _jsonl(f)
        else:
            yield from _csv(f)
        _check_stamp(f, before)


def first_row(ds: Dataset) -> dict[str, Any] | None:
    """The first row of ``ds`` (None when it has none), read as :func:`iter_rows` reads it but no further:
    of a Parquet file, a batch of one row (not the 65 536 rows a batch holds, turned into dicts)."""
    for f in ds.files:
        rows = _parquet(f, batch_rows=1) if ds.fmt == "parquet" else _jsonl(f) if ds.fmt == "jsonl" else _csv(f)
        for _f, _n, row in rows:
            return row
    return None


Stamp = tuple[int, int, int, int]  # st_dev, st_ino, st_size, st_mtime_ns


def stamps(ds: Dataset) -> dict[Path, Stamp]:
    """The stamp of every file of ``ds`` (for :func:`check_unchanged`). DatasetError when one is gone."""
    return {f: _stamp(f) for f in ds.files}


def check_unchanged(ds: Dataset, before: dict[Path, Stamp]) -> None:
    """Raise DatasetError naming the first file of ``ds`` whose stamp is not ``before``'s any more."""
    for f in ds.files:
        _check_stamp(f, before[f])


def _stamp(f: Path) -> Stamp:
    try:
        st = os.stat(f)
    except OSError as e:
        raise DatasetError(f"{f}: cannot be read: {e.strerror or e}; no new version was made") from None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _check_stamp(f: Path, before: Stamp) -> None:
    after = _stamp(f)
    if after != before:
        what = ("was replaced" if after[:2] != before[:2] else
                f"changed size ({before[2]} -> {after[2]} bytes)" if after[2] != before[2] else "was modified")
        raise DatasetError(f"{f} {what} while it was read; no new version was made",
                           hint="load it again once whatever writes it has finished")


def _parquet(f: Path, batch_rows: int = _PARQUET_BATCH_ROWS) -> Iterator[tuple[Path, int, dict[str, Any]]]:
    try:
        import pyarrow.parquet as pq
    except ImportError as e:
        raise MissingDependencyError("reading Parquet needs pyarrow, which is not installed", hint=PARQUET_HINT) from e
    try:
        # pre_buffer=False: with it, pyarrow buffers the column chunks of every row group iter_batches is
        # asked for (the whole file) up front, so memory grew with the file; without it a row group's
        # chunks are read as its batches are, and memory stays that of a row group and a batch.
        pf = pq.ParquetFile(f, pre_buffer=False)
        n = 0
        for batch in pf.iter_batches(batch_size=batch_rows):
            for row in batch.to_pylist():
                n += 1
                yield f, n, row
    except (OSError, ValueError) as e:  # pyarrow.ArrowInvalid is a ValueError
        raise DatasetError(f"{f}: not a readable Parquet file: {str(e).splitlines()[0]}") from None


def _jsonl(f: Path) -> Iterator[tuple[Path, int, dict[str, Any]]]:
    with open(f, "rb") as fh:
        for n, line in enumerate(fh, 1):
            try:
                row = jsonl_row(line)
            except ExtractError as e:
                raise DatasetError(f"{f} line {n}: {e}") from None
            if row is not None:
                yield f, n, row


def _csv(f: Path) -> Iterator[tuple[Path, int, dict[str, Any]]]:
    with open(f, newline="", encoding="utf-8-sig") as fh:  # a byte-order mark (Excel's) is not in the header
        reader = csv.reader(fh)
        try:
            header = next(reader)
        except StopIteration:
            return
        except (csv.Error, UnicodeDecodeError) as e:
            raise DatasetError(f"{f}: {e}") from None
        try:
            for n, values in enumerate(reader, 1):
                if not values:
                    continue
                if len(values) != len(header):
                    raise DatasetError(f"{f} row {n}: {len(values)} fields, the header has {len(header)}")
                yield f, n, {k: (v if v != "" else None) for k, v in zip(header, values)}
        except (csv.Error, UnicodeDecodeError) as e:
            raise DatasetError(f"{f} row {reader.line_num}: {e}") from None
