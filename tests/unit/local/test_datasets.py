"""local.datasets: what the put path reads from a dataset."""

from __future__ import annotations

import pytest

from statectl.errors import NotFoundError, UsageError
from statectl.local.datasets import first_row, iter_rows, open_dataset


def test_csv_with_a_byte_order_mark_and_empty_fields(tmp_path):
    f = tmp_path / "excel.csv"
    f.write_bytes(b"\xef\xbb\xbfid,name\r\n1,ann\r\n2,\r\n")
    rows = [row for _, _, row in iter_rows(open_dataset(f))]
    assert rows == [{"id": "1", "name": "ann"}, {"id": "2", "name": None}]


def test_a_dir_holds_only_its_format_files(tmp_path):
    d = tmp_path / "export"
    (d / "sub").mkdir(parents=True)
    (d / "part-1.jsonl").write_text('{"id": 2}\n')
    (d / "sub" / "part-0.jsonl").write_text('{"id": 1}\n\n')
    (d / "README.txt").write_text("not data\n")
    (d / "_SUCCESS").write_text("")
    (d / ".part-1.jsonl.crc").write_text("x")
    ds = open_dataset(d)
    assert ds.fmt == "jsonl" and [p.name for p in ds.files] == ["part-1.jsonl", "part-0.jsonl"]
    assert [row["id"] for _, _, row in iter_rows(ds)] == [2, 1]
    with pytest.raises(NotFoundError):
        open_dataset(d, "csv")
    with pytest.raises(UsageError):
        open_dataset(d, "xml")
    with pytest.raises(NotFoundError):
        open_dataset(tmp_path / "missing")


def test_first_row_is_the_first_row_read_past_empty_files(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = tmp_path / "parquet"
    d.mkdir()
    pq.write_table(pa.table({"id": pa.array([], pa.int64())}), d / "a.parquet")
    pq.write_table(pa.table({"id": list(range(5, 100_005)), "v": ["x"] * 100_000}), d / "b.parquet",
                   row_group_size=7)
    j = tmp_path / "jsonl"
    j.mkdir()
    (j / "a.jsonl").write_text("\n\n")
    (j / "b.jsonl").write_text('{"id": 3}\n{"id": 4}\n')
    c = tmp_path / "c.csv"
    c.write_text("id,v\n")
    for ds, want in ((open_dataset(d), {"id": 5, "v": "x"}), (open_dataset(j), {"id": 3}), (open_dataset(c), None)):
        assert first_row(ds) == want == next((row for _, _, row in iter_rows(ds)), None)
