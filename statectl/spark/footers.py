"""The Parquet footers of a files build, read once on the driver with pyarrow (:func:`read_footers`), and
what the build takes from them instead of asking Spark: the rows and bytes the Arrow batches are sized by
(statectl.spark.frames.arrow_batches), the row groups the key sample reads (statectl.spark.sampler
.parquet_sample), the Spark schema of the key and value columns (:meth:`Footers.spark_schema`: Spark's
reader then runs no job to infer one), and the key ranges of the row groups (:meth:`Footers.sorted_runs`:
a dataset already sorted by key is written without a shuffle). What they say only chooses how the build
runs; the build checks its result whatever they say (statectl.spark.job)."""

from __future__ import annotations

import threading
from typing import Any

from statectl.spark.context import BuildJob, local_path

# Parquet's physical type and logical type of a column -> the Spark type Spark's reader infers for it, for
# the types whose values plain_frame casts (frames._PLAIN_TYPES); any other column: Spark infers the schema.
_SPARK_TYPES = {("BYTE_ARRAY", "String"): "STRING", ("BYTE_ARRAY", "None"): "BINARY",
                ("INT32", "None"): "INT", ("INT32", "Int(bitWidth=32, isSigned=true)"): "INT",
                ("INT32", "Int(bitWidth=16, isSigned=true)"): "SMALLINT",
                ("INT32", "Int(bitWidth=8, isSigned=true)"): "TINYINT",
                ("INT64", "None"): "BIGINT", ("INT64", "Int(bitWidth=64, isSigned=true)"): "BIGINT",
                ("BOOLEAN", "None"): "BOOLEAN"}


class Footers:
    """The footers of the dataset's files (``files``: pyarrow ParquetFile objects, in the spec's order)."""

    def __init__(self, files: list[Any]):
        self.files = files
        self._lock = threading.Lock()
        self._samples: dict[tuple[str, int, int], list[Any] | None] = {}

    def rows_and_bytes(self) -> tuple[int, int]:
        """Rows and uncompressed bytes of every row group of every file."""
        rows = size = 0
        for pf in self.files:
            meta = pf.metadata
            rows += meta.num_rows
            size += sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        return rows, size

    def row_groups(self) -> list[tuple[Any, int, int]]:
        """(file, row group, rows) of every row group, in the dataset's order."""
        return [(pf, i, pf.metadata.row_group(i).num_rows) for pf in self.files
                for i in range(pf.metadata.num_row_groups)]

    def key_sample(self, column: str, groups: int, keep: int) -> list[Any] | None:
        """Of at most ``groups`` row groups spread from the first to the last, the key column's values at
        even steps, about ``keep`` of each (pyarrow arrays; nulls included); read once (a thread may read
        it while the session starts, the build takes it after). None when a row group cannot be read."""
        with self._lock:
            if (column, groups, keep) not in self._samples:
                self._samples[column, groups, keep] = self._read_sample(column, groups, keep)
            return self._samples[column, groups, keep]

    def _read_sample(self, column: str, groups: int, keep: int) -> list[Any] | None:
        import pyarrow as pa

        chosen = self.row_groups()
        if len(chosen) > groups:
            step = len(chosen) / groups
            chosen = [chosen[int(i * step)] for i in range(groups)]
        out = []
        try:
            for pf, i, rows in chosen:
                if rows:
                    values = pf.read_row_group(i, columns=[column]).column(0)
                    out.append(values.take(pa.array(range(0, rows, max(1, rows // keep)), pa.int64())))
        except Exception:  # a file pyarrow reads otherwise than Spark: Spark samples
            return None
        return out

    def spark_schema(self, columns: list[str]) -> str | None:
        """A DDL schema of ``columns`` with the types Spark's reader infers from these files; None when a
        column is missing, nested, of another type (_SPARK_TYPES), of another type in another file, or
        when another column has its name in another case (Spark matches names ignoring case)."""
        types: dict[str, str] = {}
        for pf in self.files:
            schema = pf.schema
            names = [schema.column(i).path for i in range(len(schema))]
            top = pf.schema_arrow.names
            for c in columns:
                if sum(n.lower() == c.lower() for n in top) != 1 or c not in names:
                    return None
                col = schema.column(names.index(c))
                kind = _SPARK_TYPES.get((col.physical_type, str(col.logical_type)))
                if kind is None or col.max_repetition_level or "." in col.path or types.setdefault(c, kind) != kind:
                    return None
        return ", ".join(f"`{c.replace('`', '``')}` {types[c]}" for c in dict.fromkeys(columns))

    def sorted_runs(self, column: str) -> list[tuple[bytes, bytes]] | None:
        """The (min, max) key bytes of every row group in the dataset's order, when the statistics of the
        string (or binary) key column say that each row group's keys are above the one before it's; else
        None (no statistics, another type, or ranges that overlap)."""
        out: list[tuple[bytes, bytes]] = []
        for pf in self.files:
            schema = pf.schema
            names = [schema.column(i).path for i in range(len(schema))]
            if column not in names or schema.column(names.index(column)).physical_type != "BYTE_ARRAY":
                return None
            idx = names.index(column)
            for i in range(pf.metadata.num_row_groups):
                rg = pf.metadata.row_group(i)
                if not rg.num_rows:
                    continue
                st = rg.column(idx).statistics
                if st is None or not st.has_min_max:
                    return None
                lo, hi = (v if isinstance(v, bytes) else str(v).encode("utf-8", "surrogatepass")
                          for v in (st.min, st.max))
                if out and lo <= out[-1][1]:
                    return None
                out.append((lo, hi))
        return out


def read_footers(job: BuildJob) -> Footers | None:
    """The footers of a Parquet build's files; None for another format, or when a file is not a local
    file pyarrow can read (Spark then reads it its own way)."""
    if job.spec.fmt != "parquet":
        return None
    try:
        import pyarrow.parquet as pq

        return Footers([pq.ParquetFile(local_path(f), pre_buffer=False)
                        for f in list(job.spec.files) or [str(job.spec.path)]])
    except Exception:  # a dir, a remote path, a file pyarrow reads otherwise than Spark: Spark reads it
        return None
