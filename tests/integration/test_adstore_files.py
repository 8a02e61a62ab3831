"""statectl adstore load --from-file (seed 003, bounded datasets) as real processes: CSV, JSON lines and
Parquet datasets built into sealed versions behind an atomic link, partitioned by Kafka's partitioner,
the manifest's figures, versions / switch / rollback / --keep-versions, a build killed mid-way (never
current, removed by the next load), and the error exits. Every store is compared key for key with the
entries the rows make, computed here independently of statectl."""

from __future__ import annotations

import csv
import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from statectl.formats.adstore import MANIFEST, Digest, murmur2
from tests.tools.standby_helpers import STATECTL, clean_env, cli, read_store, wait_until

STORE = "lookup"


def as_json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def kafka_partition(key: bytes, n: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % n


NAMES = ["Ada", "Bö", "李", "x,y", 'q"uote', "line\nbreak"]


def make_rows(seed: int, n: int, keys: int | None = None) -> list[dict[str, Any]]:
    """Rows id, name, score, city; some ids repeated (the last row wins), some nulls, non-ASCII names."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        ident = f"id-{rng.randrange(keys)}" if keys else f"id-{i:05d}"
        name = None if rng.random() < 0.1 else rng.choice(NAMES) + f"-{i}"
        rows.append({"id": ident, "name": name,
                     "score": rng.randrange(1000) if rng.random() < 0.9 else None,
                     "city": rng.choice(["Oslo", "Lyon", None])})
    return rows


def write_dataset(path: Path, fmt: str, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "csv":
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(list(rows[0]))
            for r in rows:
                w.writerow(["" if v is None else v for v in r.values()])
    elif fmt == "jsonl":
        with open(path, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
            f.write("\n")  # a blank line is skipped
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=max(1, len(rows) // 3))
    return path


def as_read(fmt: str, row: dict[str, Any]) -> dict[str, Any]:
    """A row as the format gives it back: CSV values are strings, an empty field null."""
    if fmt == "csv":
        return {k: None if v is None else str(v) for k, v in row.items()}
    return row


def expected_entries(fmt: str, rows: list[dict[str, Any]], mode: str) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    for row in rows:
        row = as_read(fmt, row)
        key = row["id"].encode()
        if mode == "value-column":
            v = row["name"]
            out[key] = b"" if v is None else v.encode()
        elif mode == "value-columns":
            out[key] = as_json({"score": row["score"], "name": row["name"]})
        else:
            out[key] = as_json({c: v for c, v in row.items() if c != "id"})
    return out


MODES = {"value-column": ["--value-field", "name"], "value-columns": ["--value-fields", "score,name"],
         "default": []}


def digest_of(entries: dict[bytes, bytes]) -> Digest:
    d = Digest()
    for k, v in entries.items():
        d.add(k, v)
    return d


class Files:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.state = tmp / "state"

    def store(self, k: int = 0) -> Path:
        return self.state / STORE / f"Partition_{k}"

    def versions_dir(self, k: int = 0) -> Path:
        return self.state / STORE / f"Partition_{k}.versions"

    def where(self) -> list[str]:
        return ["--store", STORE, "--state-dir", str(self.state)]

    def load(self, dataset: Path, *extra: str, code: int = 0) -> subprocess.CompletedProcess:
        return cli(self.tmp, "adstore", "load", "--from-file", str(dataset), "--key-field", "id", *self.where(),
                   *extra, code=code)

    def load_json(self, dataset: Path, *extra: str) -> dict:
        return json.loads(self.load(dataset, *extra, "-o", "json").stdout)

    def current(self, k: int = 0) -> int | None:
        link = self.store(k)
        if not os.path.lexists(link):
            return None
        target = os.readlink(link)
        assert target.startswith(f"Partition_{k}.versions/"), target
        return int(target.rsplit("/", 1)[1])

    def manifest(self, version: int, k: int = 0) -> dict:
        return json.loads((self.versions_dir(k) / str(version) / MANIFEST).read_text())

    def entries_of_version(self, version: int, k: int = 0) -> dict[bytes, bytes]:
        return read_store(self.versions_dir(k) / str(version))

    def leftovers(self, k: int = 0) -> list[str]:
        return sorted(p.name for p in self.versions_dir(k).iterdir() if not p.name.isdigit())


@pytest.fixture
def files(tmp_path: Path) -> Files:
    return Files(tmp_path)


def error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


# -- formats -------------------------------------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fmt,mode", [("csv", "value-column"), ("jsonl", "value-columns"), ("parquet", "default")])
def test_a_dataset_becomes_version_1(files: Files, fmt: str, mode: str):
    rows = make_rows(1, 400, keys=300)
    dataset = write_dataset(files.tmp / "data" / f"members.{fmt}", fmt, rows)
    expected = expected_entries(fmt, rows, mode)
    assert len(expected) < len(rows)  # repeated ids: the last row wins
    r = files.load_json(dataset, *MODES[mode])
    store = files.store()
    assert store.is_symlink() and os.readlink(store) == "Partition_0.versions/1"
    assert files.current() == 1
    assert read_store(store) == expected
    d = digest_of(expected)
    first, last = min(expected).hex(), max(expected).hex()
    assert r["source"] == str(dataset) and r["rows"] == 400 and r["version"] == 1 and r["built_with"] == "put"
    [s] = r["stores"]
    assert (s["store_dir"], s["version"], s["rows"], s["keys"], s["first_key"], s["last_key"], s["checksum"],
            s["previous"], s["deleted_versions"]) == \
        (str(store), 1, 400, len(expected), first, last, f"{d.checksum:016x}", None, [])
    m = files.manifest(1)
    assert (m["version"], m["source"], m["rows"], m["keys"], m["first_key"], m["last_key"], m["checksum"],
            m["built_with"], m["extra"]) == \
        (1, str(dataset), 400, len(expected), first, last, f"{d.checksum:016x}", "put", {"format": fmt})
    assert files.leftovers() == []
    assert sorted(p.name for p in (files.state / STORE).iterdir()) == \
        ["Partition_0", "Partition_0.adstore.lock", "Partition_0.versions"]


@pytest.mark.timeout(120)
def test_partitioned_by_kafkas_partitioner_from_a_dir(files: Files):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = make_rows(2, 600)
    data = files.tmp / "export"
    data.mkdir()
    pq.write_table(pa.Table.from_pylist(rows[:250]), data / "part-00000.parquet")
    pq.write_table(pa.Table.from_pylist(rows[250:]), data / "part-00001.parquet")
    (data / "_SUCCESS").write_bytes(b"")
    (data / ".part-00000.parquet.crc").write_bytes(b"junk")
    r = files.load_json(data, "--partition-count", "3", "--value-field", "score")
    # an int column as the value: its JSON text
    expected = {row["id"].encode(): b"" if row["score"] is None else str(row["score"]).encode() for row in rows}
    split: list[dict[bytes, bytes]] = [{}, {}, {}]
    for k, v in expected.items():
        split[kafka_partition(k, 3)][k] = v
    assert all(split) and r["version"] == 1 and r["rows"] == 600
    for k in range(3):
        assert files.current(k) == 1
        assert read_store(files.store(k)) == split[k]
        m = files.manifest(1, k)
        assert m["keys"] == len(split[k]) and m["checksum"] == f"{digest_of(split[k]).checksum:016x}"
        assert r["stores"][k]["store_dir"] == str(files.store(k)) and r["stores"][k]["keys"] == len(split[k])


# -- versions, switch, rollback -----------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_versions_switch_rollback_and_keep_versions(files: Files):
    rows1, rows2, rows3 = make_rows(3, 100), make_rows(4, 120), make_rows(5, 80)
    d1 = write_dataset(files.tmp / "v1.csv", "csv", rows1)
    d2 = write_dataset(files.tmp / "v2.jsonl", "jsonl", rows2)
    d3 = write_dataset(files.tmp / "v3.csv", "csv", rows3)
    e1, e2 = expected_entries("csv", rows1, "default"), expected_entries("jsonl", rows2, "default")
    e3 = expected_entries("csv", rows3, "default")
    files.load(d1)
    r = files.load_json(d2)
    assert r["version"] == 2 and r["stores"][0]["previous"] == 1 and r["stores"][0]["deleted_versions"] == []
    assert files.current() == 2 and read_store(files.store()) == e2
    assert files.entries_of_version(1) == e1  # kept (--keep-versions 2 by default)

    v = json.loads(cli(files.tmp, "adstore", "versions", *files.where(), "-o", "json").stdout)
    assert v["store_dir"] == str(files.store()) and v["current"] == 2
    assert [(x["version"], x["current"], x["rows"], x["keys"], x["checksum"], x["built_with"], x["source"])
            for x in v["versions"]] == \
        [(1, False, 100, len(e1), f"{digest_of(e1).checksum:016x}", "put", str(d1)),
         (2, True, 120, len(e2), f"{digest_of(e2).checksum:016x}", "put", str(d2))]
    text = cli(files.tmp, "adstore", "versions", "--store-dir", str(files.store())).stdout
    assert text.splitlines()[0].split() == ["VERSION", "CREATED", "KEYS", "BUILT", "SOURCE", "(*", "CURRENT)"]
    assert text.splitlines()[2].startswith("*       2") and text.splitlines()[1].startswith("        1")

    r = json.loads(cli(files.tmp, "adstore", "switch", *files.where(), "-o", "json").stdout)  # a rollback
    assert (r["version"], r["previous"]) == (1, 2)
    assert files.current() == 1 and read_store(files.store()) == e1
    r = cli(files.tmp, "adstore", "switch", *files.where(), code=10)  # nothing older than 1
    assert "no version older" in error_line(r.stderr)
    out = cli(files.tmp, "adstore", "switch", *files.where(), "--version", "2").stdout
    assert "version 2 is current (was 1)" in out
    assert files.current() == 2 and read_store(files.store()) == e2
    r = cli(files.tmp, "adstore", "switch", *files.where(), "--version", "7", code=10)
    assert "no version 7" in error_line(r.stderr)

    r = files.load_json(d3, "--keep-versions", "1")
    assert r["version"] == 3 and r["stores"][0]["deleted_versions"] == [1, 2]
    assert sorted(p.name for p in files.versions_dir().iterdir()) == ["3"]
    assert read_store(files.store()) == e3
    r = cli(files.tmp, "adstore", "switch", *files.where(), "--version", "1", code=10)
    assert files.current() == 3


# -- interrupted and failed builds ---------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_a_build_killed_midway_never_becomes_current(files: Files):
    small = make_rows(6, 50)
    d1 = write_dataset(files.tmp / "small.csv", "csv", small)
    e1 = expected_entries("csv", small, "default")
    files.load(d1)
    big = files.tmp / "big.csv"
    with open(big, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "name", "score", "city"])
        for i in range(300_000):
            w.writerow([f"id-{i:07d}", f"name-{i}", i % 997, "Oslo"])
    rng = random.Random(20260612)
    for trial in range(2):
        err = files.tmp / f"killed-{trial}.err"
        with open(err, "wb") as fh:
            proc = subprocess.Popen([STATECTL, "adstore", "load", "--from-file", str(big), "--key-field", "id",
                                     *files.where()], env=clean_env(files.tmp), cwd=files.tmp,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fh)
        try:
            wait_until(lambda proc=proc: any(p.name.startswith(".building-") for p in files.versions_dir().iterdir())
                       or proc.poll() is not None, 60, "the build starts")
            time.sleep(rng.uniform(0.0, 0.6))
        finally:
            proc.kill()
            proc.wait(30)
        assert proc.returncode == -signal.SIGKILL, err.read_text()
        assert files.current() == 1 and read_store(files.store()) == e1
        assert [p.name for p in files.versions_dir().iterdir() if p.name.isdigit()] == ["1"]
        v = json.loads(cli(files.tmp, "adstore", "versions", *files.where(), "-o", "json").stdout)
        assert [x["version"] for x in v["versions"]] == [1]
    leftovers = files.leftovers()
    assert leftovers and all(name.startswith(".building-") for name in leftovers)
    rows2 = make_rows(7, 60)
    r = files.load_json(write_dataset(files.tmp / "next.jsonl", "jsonl", rows2))
    assert r["version"] == 2 and files.current() == 2
    assert read_store(files.store()) == expected_entries("jsonl", rows2, "default")
    assert files.leftovers() == []


@pytest.mark.timeout(120)
def test_rows_without_their_key(files: Files):
    rows = make_rows(8, 30)
    d1 = write_dataset(files.tmp / "good.csv", "csv", rows)
    files.load(d1)
    e1 = read_store(files.store())
    bad = files.tmp / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows[:2]) + '{"name": "no id"}\n'
                   + json.dumps(rows[3]) + "\n")
    r = files.load(bad, code=1)
    line = error_line(r.stderr)
    assert f"{bad} row 3" in line and "no column 'id'" in line
    nullkey = files.tmp / "nullkey.csv"
    nullkey.write_text("id,name\na,1\nb,2\n,3\n")
    r = files.load(nullkey, code=1)
    assert f"{nullkey} row 3" in error_line(r.stderr) and "null" in r.stderr
    r = files.load(bad, "--partition-count", "2", code=1)  # a partitioned build fails: no store gets a version
    assert f"{bad} row 3" in error_line(r.stderr)
    assert files.current() == 1 and read_store(files.store()) == e1
    assert sorted(p.name for p in files.versions_dir().iterdir()) == ["1"]
    assert files.current(1) is None and list(files.versions_dir(1).iterdir()) == []


@pytest.mark.timeout(120)
def test_a_plain_store_dir_and_a_missing_dataset(files: Files):
    import rocksdict

    plain = files.store()
    plain.parent.mkdir(parents=True)
    db = rocksdict.Rdict(str(plain), rocksdict.Options(raw_mode=True))
    db[b"k"] = b"v"
    db.close()
    d = write_dataset(files.tmp / "d.csv", "csv", make_rows(9, 10))
    r = files.load(d, code=2)
    assert str(plain) in error_line(r.stderr) and "not a versioned adstore" in r.stderr
    assert read_store(plain) == {b"k": b"v"} and not files.versions_dir().exists()
    r = cli(files.tmp, "adstore", "versions", *files.where(), code=2)
    r = files.load(files.tmp / "nope.parquet", code=10)
    assert "does not exist" in error_line(r.stderr)
    empty = files.tmp / "empty-dir"
    empty.mkdir()
    r = files.load(empty, "--format", "csv", code=10)
    assert "holds no csv files" in error_line(r.stderr)


@pytest.mark.timeout(120)
def test_integer_keys_are_said_to_be_stored_as_text(files: Files):
    """An int key column: each key is its decimal text, and the load and its dry run say so (a job with a
    long key serde would find none of them); a string key column gets no such note."""
    d = write_dataset(files.tmp / "n.jsonl", "jsonl", [{"id": i, "v": f"x{i}"} for i in (7, 42, 1000)])
    plan = json.loads(files.load(d, "--dry-run", "-o", "json").stdout)
    assert any("'id' holds numbers" in n and "decimal text" in n for n in plan["notes"]), plan["notes"]
    r = files.load(d, "--value-field", "v")
    assert "note: key column 'id' holds numbers" in r.stderr
    assert read_store(files.store()) == {b"7": b"x7", b"42": b"x42", b"1000": b"x1000"}
    s = write_dataset(files.tmp / "s.jsonl", "jsonl", [{"id": "a", "v": "x"}])
    assert json.loads(files.load(s, "-o", "json").stdout)["notes"] == []


def test_one_flag_vocabulary_for_topics_and_files(files: Files):
    """--key-field/--value-field name a file's columns too; the old file flags and --partitions N on files
    are refused with the new names (exit 2), leaving nothing behind."""
    d = write_dataset(files.tmp / "d.csv", "csv", make_rows(3, 10))
    for extra, says in ((["--key-column", "id"], "--key-column, --value-column and --value-columns are now "
                         "--key-field, --value-field and --value-fields"),
                        (["--partitions", "3"], "--partition-count N"),
                        (["--extractor", "m:f"], "--extractor is for --topic")):
        r = cli(files.tmp, "adstore", "load", "--from-file", str(d), *files.where(), *extra, code=2)
        assert says in error_line(r.stderr), r.stderr
    r = cli(files.tmp, "adstore", "load", "--kafka", "127.0.0.1:9", "--topic", "t", *files.where(),
            "--value-fields", "a,b", code=2)
    assert "a file's columns (--value-fields) are for --from-file" in error_line(r.stderr)
    assert not files.state.exists()


# -- the digest computed while writing ---------------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("order", ["sorted", "sorted-repeat-at-a-batch-edge", "sorted-repeat-across-files",
                                   "shuffled"])
def test_the_put_paths_digest_is_the_stores_whatever_the_key_order(tmp_path: Path, order: str):
    """Keys strictly ascending (per store, across batches and files): the digest is made from the batches as
    they are written, with no re-read of the store (no digest_s phase). A key repeated (at a batch's edge,
    across two files) or keys out of order: the store is re-read. Either way the manifest's figures are
    those of the entries the store holds (read back here), broadcast and partitioned."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from statectl.engine.adstore.files import FileLoadOptions, load_file
    from statectl.formats.adstore import KeyValueSpec

    keys = [f"k{i:05d}" for i in range(500)]
    if order == "sorted-repeat-at-a-batch-edge":
        keys.insert(70, keys[69])  # rows 69 and 70: the last of one batch of 70 rows and the first of the next
    elif order == "sorted-repeat-across-files":
        keys.insert(250, keys[249])
    elif order == "shuffled":
        random.Random(3).shuffle(keys)
    data = tmp_path / "data"
    data.mkdir()
    values = [f"v{i}" for i in range(len(keys))]
    pq.write_table(pa.table({"id": keys[:250], "v": values[:250]}), data / "part-0.parquet", row_group_size=60)
    pq.write_table(pa.table({"id": keys[250:], "v": values[250:]}), data / "part-1.parquet", row_group_size=60)
    expected = {k.encode(): v.encode() for k, v in zip(keys, values)}
    for partitions in (None, 3):
        opts = FileLoadOptions(data, f"s{partitions}", state_dir=tmp_path / "state", partitions=partitions,
                               spec=KeyValueSpec(key_column="id", value_column="v"), batch_rows=70)
        r = load_file(opts)
        assert ("digest_s" in r.phases) == (order != "sorted"), r.phases
        assert r.rows == len(keys)
        got: dict[bytes, bytes] = {}
        for s in r.stores:
            entries = read_store(Path(s.store_dir))
            d = digest_of(entries)
            assert (s.keys, s.first_key, s.last_key, s.checksum) == \
                (len(entries), min(entries).hex(), max(entries).hex(), f"{d.checksum:016x}")
            got.update(entries)
        assert got == expected


@pytest.mark.timeout(120)
def test_progress_moves_as_the_rows_are_read(files: Files, tmp_path: Path):
    """The load's bar gets the rows' bytes and its status the rows read, batch by batch while the files are
    read (a status before the first file is done), to the result's figures."""
    from statectl.engine.adstore.load import LoadOptions, load
    from tests.tools.progress_recorder import Recorder

    rows = make_rows(12, 25_000)
    data = tmp_path / "export"
    write_dataset(data / "part-0.csv", "csv", rows[:12_500])
    write_dataset(data / "part-1.csv", "csv", rows[12_500:])
    rec = Recorder()
    r = load(LoadOptions(STORE, files.state, from_file=data, key_field="id", value_field="name"), progress=rec)
    kinds = [c[0] for c in rec.calls if c[0] != "note"]
    assert kinds[0] == "start" and kinds[-1] == "stop"
    assert kinds.index("status") < kinds.index("file_done")  # shown while the first file is read
    seen = [s["rows"] for s in rec.statuses(f"loading {data}")]
    assert seen == [10_000, 20_000, 25_000] and r.rows == 25_000
    assert sum(c[1] for c in rec.calls if c[0] == "advance") == r.bytes > 0
