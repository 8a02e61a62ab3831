"""The SnapshotIndex model and its JSON form, against an index as a Samza job writes it."""

from __future__ import annotations

import copy
import json
import zlib
from pathlib import Path

import pytest

from statectl.errors import IndexFormatError, UnsafePathError
from statectl.snapshot.model import (
    DirIndex,
    FileBlob,
    FileIndex,
    FileMetadata,
    SnapshotIndex,
    SnapshotMetadata,
    mode_to_permissions,
    parse_index,
    permissions_to_mode,
    serialize_index,
)

SAMZA_INDEX = Path(__file__).resolve().parents[2] / "data" / "samza-index.json"

# The fields Samza's Jackson mixins know, per kind of JSON object; everything else is unknown.
_KNOWN = {
    "index": {"creation-time-millis", "snapshot-metadata", "dir-index", "prev-snapshot-index-blob-id"},
    "meta": {"checkpoint-id", "job-name", "job-id", "task-name", "store-name"},
    "dir": {"dir-name", "files-present", "files-removed", "sub-dirs-present", "sub-dirs-removed"},
    "file": {"file-name", "blobs", "file-metadata", "checksum"},
    "blob": {"blob-id", "offset"},
    "fmeta": {"creation-time-millis", "last-modified-time-millis", "size", "owner", "group", "permissions"},
}


def _known_only(obj: dict, kind: str = "index") -> dict:
    out = {k: v for k, v in obj.items() if k in _KNOWN[kind]}
    if kind == "index":
        out["snapshot-metadata"] = _known_only(out["snapshot-metadata"], "meta")
        out["dir-index"] = _known_only(out["dir-index"], "dir")
    elif kind == "dir":
        for key in ("files-present", "files-removed"):
            out[key] = [_known_only(f, "file") for f in out[key]]
        for key in ("sub-dirs-present", "sub-dirs-removed"):
            out[key] = [_known_only(d, "dir") for d in out[key]]
    elif kind == "file":
        out["blobs"] = [_known_only(b, "blob") for b in out["blobs"]]
        out["file-metadata"] = _known_only(out["file-metadata"], "fmeta")
    return out


@pytest.fixture(scope="module")
def samza_bytes() -> bytes:
    return SAMZA_INDEX.read_bytes()


@pytest.fixture(scope="module")
def samza_json(samza_bytes) -> dict:
    return json.loads(samza_bytes)


@pytest.fixture(scope="module")
def samza_index(samza_bytes) -> SnapshotIndex:
    return parse_index(samza_bytes)


# ---- the Samza file ------------------------------------------------------------------------------

def test_samza_file_parses_to_exact_values(samza_index):
    i = samza_index
    assert i.creation_time_millis == 1718035261187
    assert i.prev_snapshot_index_blob_id == "AAYQAQe0AAoAAQAAAAAAADk-r1xC7ubnTwGU7m6Czn1G2g"
    assert i.snapshot_metadata == SnapshotMetadata(
        checkpoint_id="1718035261042-382917", job_name="page-view-counter", job_id="1",
        task_name="Partition 3", store_name="page-view-counts")
    root = i.dir_index
    assert root.dir_name == ""
    assert [f.file_name for f in root.files_present] == [
        "CURRENT", "MANIFEST-000014", "OPTIONS-000016", "000009.sst", "000013.sst", "000015.log"]
    assert [f.file_name for f in root.files_removed] == ["000007.sst", "MANIFEST-000010", "OPTIONS-000012"]
    assert [d.dir_name for d in root.sub_dirs_present] == ["archive"]
    assert [d.dir_name for d in root.sub_dirs_removed] == ["lost"]

    current = root.files_present[0]
    assert current == FileIndex(
        file_name="CURRENT",
        blobs=(FileBlob("AAYQAQe0AAoAAQAAAAAAADlB0mPiTw6cRNOBwv1u6n3Bhg", 0),),
        file_metadata=FileMetadata(1718035261101, 1718035261101, 16, "samza", "hadoop", "rw-r--r--"),
        checksum=zlib.crc32(b"MANIFEST-000014\n"),
    )
    chunked = root.files_present[4]
    assert chunked.size == 163574261
    assert chunked.checksum == 2147483648  # above 2**31-1: stays unsigned
    assert [b.offset for b in chunked.blobs] == [0, 67108864, 134217728]
    empty = root.files_present[5]
    assert (empty.file_name, empty.blobs, empty.size, empty.checksum) == ("000015.log", (), 0, 0)

    archive = root.sub_dirs_present[0]
    assert [f.file_name for f in archive.files_present] == ["000004.log"]
    assert [f.file_name for f in archive.files_removed] == ["000002.log"]
    nested = archive.sub_dirs_present[0]
    assert nested.dir_name == "2024-06-10"
    assert nested.files_present[0].file_metadata.permissions == "rw-------"
    assert nested.files_present[0].file_metadata.mode == 0o600
    assert root.total_size == 205182723


def test_samza_file_has_unknown_fields_and_a_key_order_unlike_ours(samza_json, samza_index):
    # Guards the fixture itself: the tests below mean something only if these hold.
    assert _known_only(samza_json) != samza_json
    ours = json.loads(serialize_index(samza_index))
    assert list(samza_json) != list(ours)
    assert list(samza_json["snapshot-metadata"]) != list(ours["snapshot-metadata"])
    assert list(samza_json["dir-index"]["files-present"][0]) != list(ours["dir-index"]["files-present"][0])


def test_serialize_keeps_every_known_field_of_the_samza_file(samza_json, samza_index):
    assert json.loads(serialize_index(samza_index)) == _known_only(samza_json)


def test_parse_serialize_parse_is_identity(samza_index):
    data = serialize_index(samza_index)
    assert isinstance(data, bytes)
    again = parse_index(data)
    assert again == samza_index
    assert serialize_index(again) == data


def test_serialized_form_uses_samza_field_names(samza_index):
    out = json.loads(serialize_index(samza_index))
    assert set(out) == _KNOWN["index"]
    assert set(out["snapshot-metadata"]) == _KNOWN["meta"]
    assert set(out["dir-index"]) == _KNOWN["dir"]
    assert set(out["dir-index"]["files-present"][0]) == _KNOWN["file"]
    assert set(out["dir-index"]["files-present"][0]["blobs"][0]) == _KNOWN["blob"]
    assert set(out["dir-index"]["files-present"][0]["file-metadata"]) == _KNOWN["fmeta"]


def test_unknown_fields_are_ignored_everywhere(samza_json, samza_index):
    doc = copy.deepcopy(samza_json)
    doc["future-top"] = {"nested": [1, 2, 3]}
    doc["snapshot-metadata"]["version"] = 2
    doc["dir-index"]["x-extra"] = None
    doc["dir-index"]["files-present"][0]["x-extra"] = True
    doc["dir-index"]["files-present"][0]["blobs"][0]["x-extra"] = "s"
    doc["dir-index"]["files-present"][0]["file-metadata"]["x-extra"] = 1.5
    doc["dir-index"]["sub-dirs-present"][0]["sub-dirs-present"][0]["x-extra"] = []
    assert parse_index(json.dumps(doc)) == samza_index


def test_key_order_is_irrelevant(samza_json, samza_index):
    def reverse_keys(o):
        if isinstance(o, dict):
            return {k: reverse_keys(o[k]) for k in reversed(list(o))}
        if isinstance(o, list):
            return [reverse_keys(x) for x in o]
        return o

    assert parse_index(json.dumps(reverse_keys(samza_json))) == samza_index
    assert parse_index(json.dumps(samza_json, sort_keys=True)) == samza_index


@pytest.mark.parametrize("how", ["null", "missing"])
def test_prev_snapshot_id_null_or_missing_reads_as_none(samza_json, how):
    doc = copy.deepcopy(samza_json)
    if how == "null":
        doc["prev-snapshot-index-blob-id"] = None
    else:
        del doc["prev-snapshot-index-blob-id"]
    index = parse_index(json.dumps(doc))
    assert index.prev_snapshot_index_blob_id is None
    assert json.loads(serialize_index(index))["prev-snapshot-index-blob-id"] is None


def test_parse_accepts_str_and_bytes(samza_bytes, samza_index):
    assert parse_index(samza_bytes.decode("utf-8")) == samza_index


def test_blobs_are_ordered_by_offset(samza_json):
    doc = copy.deepcopy(samza_json)
    blobs = doc["dir-index"]["files-present"][4]["blobs"]
    blobs.reverse()
    index = parse_index(json.dumps(doc))
    assert [b.offset for b in index.dir_index.files_present[4].blobs] == [0, 67108864, 134217728]


def test_longs_written_as_strings_are_read(samza_json):
    doc = copy.deepcopy(samza_json)
    doc["creation-time-millis"] = "1718035261187"
    doc["dir-index"]["files-present"][0]["file-metadata"]["size"] = "16"
    doc["dir-index"]["files-present"][0]["checksum"] = str(zlib.crc32(b"MANIFEST-000014\n"))
    index = parse_index(json.dumps(doc))
    assert index.creation_time_millis == 1718035261187
    assert index.dir_index.files_present[0].size == 16


# ---- malformed input -----------------------------------------------------------------------------

def _minimal() -> dict:
    meta = {"creation-time-millis": 1, "last-modified-time-millis": 2, "size": 3, "owner": "samza",
            "group": "hadoop", "permissions": "rw-r--r--"}
    return {
        "creation-time-millis": 1718035261187,
        "snapshot-metadata": {"checkpoint-id": "1718035261042-382917", "job-name": "j", "job-id": "1",
                              "task-name": "Partition 0", "store-name": "s"},
        "dir-index": {
            "dir-name": "",
            "files-present": [{"file-name": "CURRENT", "blobs": [{"blob-id": "b1", "offset": 0}],
                               "file-metadata": dict(meta), "checksum": 7}],
            "files-removed": [],
            "sub-dirs-present": [{"dir-name": "sub", "files-present": [
                {"file-name": "f", "blobs": [{"blob-id": "b2", "offset": 0}], "file-metadata": dict(meta),
                 "checksum": 9}], "files-removed": [], "sub-dirs-present": [], "sub-dirs-removed": []}],
            "sub-dirs-removed": [],
        },
        "prev-snapshot-index-blob-id": None,
    }


def test_minimal_is_valid():
    index = parse_index(json.dumps(_minimal()))
    assert [p for p, _ in index.dir_index.walk_present()] == ["CURRENT", "sub/f"]


def test_descriptive_file_metadata_may_be_missing():
    """Times, owner and group never decide what a restore writes."""
    doc = _minimal()
    for key in ("creation-time-millis", "last-modified-time-millis", "owner", "group"):
        del _meta0(doc)[key]
    meta = parse_index(json.dumps(doc)).dir_index.files_present[0].file_metadata
    assert (meta.owner, meta.group, meta.creation_time_millis, meta.last_modified_time_millis) == ("", "", 0, 0)


def _mutated(fn):
    doc = _minimal()
    fn(doc)
    return json.dumps(doc)


def _root(doc):
    return doc["dir-index"]


def _file0(doc):
    return doc["dir-index"]["files-present"][0]


def _sub(doc):
    return doc["dir-index"]["sub-dirs-present"][0]


def _set(getter, key, value):
    def fn(doc):
        getter(doc)[key] = value
    return fn


def _delete(getter, key):
    def fn(doc):
        del getter(doc)[key]
    return fn


def _meta0(doc):
    return _file0(doc)["file-metadata"]


def _dup_file(doc):
    _root(doc)["files-present"].append(copy.deepcopy(_file0(doc)))


def _file_and_dir_same_name(doc):
    _sub(doc)["dir-name"] = "CURRENT"


def _dup_in_sub(doc):
    _sub(doc)["files-present"].append(copy.deepcopy(_sub(doc)["files-present"][0]))


def _dup_sub_dir(doc):
    _root(doc)["sub-dirs-present"].append(copy.deepcopy(_sub(doc)))


_VALID = json.dumps(_minimal())

MALFORMED = [
    # (id, input, message fragments)
    ("truncated", _VALID[: len(_VALID) // 2], ["not valid JSON"]),
    ("truncated-one-char", _VALID[:-1], ["not valid JSON"]),
    ("empty", "", ["not valid JSON"]),
    ("not-utf8", b"\xff\xfe{}", ["not valid JSON"]),
    ("array", "[]", ["top level is not a JSON object"]),
    ("string", '"index"', ["top level is not a JSON object"]),
    ("null", "null", ["top level is not a JSON object"]),
    ("missing-dir-index", _mutated(_delete(lambda d: d, "dir-index")), ["dir-index"]),
    ("dir-index-null", _mutated(_set(lambda d: d, "dir-index", None)), ["dir-index"]),
    ("dir-index-list", _mutated(_set(lambda d: d, "dir-index", [])), ["dir-index is not a JSON object"]),
    ("missing-metadata", _mutated(_delete(lambda d: d, "snapshot-metadata")),
     ["missing field snapshot-metadata"]),
    ("missing-checkpoint-id", _mutated(_delete(lambda d: d["snapshot-metadata"], "checkpoint-id")),
     ["missing field snapshot-metadata.checkpoint-id"]),
    ("metadata-wrong-type", _mutated(_set(lambda d: d, "snapshot-metadata", "x")),
     ["snapshot-metadata has the wrong type"]),
    ("creation-time-not-number", _mutated(_set(lambda d: d, "creation-time-millis", "yesterday")),
     ["creation-time-millis is not a number"]),
    ("creation-time-bool", _mutated(_set(lambda d: d, "creation-time-millis", True)),
     ["creation-time-millis has the wrong type"]),
    ("creation-time-float", _mutated(_set(lambda d: d, "creation-time-millis", 1.5)),
     ["creation-time-millis has the wrong type"]),
    ("prev-id-number", _mutated(_set(lambda d: d, "prev-snapshot-index-blob-id", 12)),
     ["prev-snapshot-index-blob-id has the wrong type"]),
    ("files-present-object", _mutated(_set(_root, "files-present", {})),
     ["dir-index.files-present has the wrong type"]),
    ("sub-dirs-present-string", _mutated(_set(_root, "sub-dirs-present", "sub")),
     ["dir-index.sub-dirs-present has the wrong type"]),
    ("file-entry-not-object", _mutated(_set(_root, "files-present", ["CURRENT"])),
     ["dir-index.files-present[0] is not a JSON object"]),
    ("file-name-number", _mutated(_set(_file0, "file-name", 5)),
     ["dir-index.files-present[0].file-name has the wrong type"]),
    ("file-name-missing", _mutated(_delete(_file0, "file-name")),
     ["missing field dir-index.files-present[0].file-name"]),
    ("blobs-not-list", _mutated(_set(_file0, "blobs", {"blob-id": "b"})),
     ["dir-index.files-present[0].blobs has the wrong type"]),
    ("blob-not-object", _mutated(_set(_file0, "blobs", ["b1"])),
     ["dir-index.files-present[0].blobs[0] is not a JSON object"]),
    ("blob-id-missing", _mutated(lambda d: _file0(d)["blobs"][0].pop("blob-id")),
     ["missing field dir-index.files-present[0].blobs[0].blob-id"]),
    ("negative-offset", _mutated(lambda d: _file0(d)["blobs"][0].update(offset=-1)),
     ["negative offset", "dir-index.files-present[0].blobs[0]"]),
    ("file-metadata-missing", _mutated(_delete(_file0, "file-metadata")),
     ["missing field dir-index.files-present[0].file-metadata"]),
    ("size-missing", _mutated(_delete(_meta0, "size")),
     ["missing field dir-index.files-present[0].file-metadata.size"]),
    ("size-float", _mutated(_set(_meta0, "size", 1.5)),
     ["dir-index.files-present[0].file-metadata.size has the wrong type"]),
    ("negative-size", _mutated(_set(_meta0, "size", -1)),
     ["negative size", "dir-index.files-present[0].file-metadata"]),
    ("owner-number", _mutated(_set(_meta0, "owner", 1000)),
     ["dir-index.files-present[0].file-metadata.owner has the wrong type"]),
    ("permissions-short", _mutated(_set(_meta0, "permissions", "rw-r--r-")), ["invalid permissions 'rw-r--r-'"]),
    ("permissions-octal", _mutated(_set(_meta0, "permissions", "0644")), ["invalid permissions '0644'"]),
    ("permissions-misplaced", _mutated(_set(_meta0, "permissions", "wr-r--r--")),
     ["invalid permissions 'wr-r--r--'"]),
    ("permissions-sticky", _mutated(_set(_meta0, "permissions", "rwxrwxrwt")), ["invalid permissions 'rwxrwxrwt'"]),
    ("checksum-negative", _mutated(_set(_file0, "checksum", -1)),
     ["checksum out of CRC32 range", "dir-index.files-present[0]"]),
    ("checksum-too-big", _mutated(_set(_file0, "checksum", 2 ** 32)), ["checksum out of CRC32 range"]),
    ("checksum-string", _mutated(_set(_file0, "checksum", "abc")),
     ["dir-index.files-present[0].checksum is not a number"]),
    ("duplicate-file", _mutated(_dup_file), ["'CURRENT' is listed twice in dir-index"]),
    ("file-and-dir-same-name", _mutated(_file_and_dir_same_name), ["'CURRENT' is listed twice in dir-index"]),
    ("duplicate-sub-dir", _mutated(_dup_sub_dir), ["'sub' is listed twice in dir-index"]),
    ("duplicate-in-sub-dir", _mutated(_dup_in_sub), ["'f' is listed twice in dir-index.sub-dirs-present[0]"]),
    ("sub-dir-name-missing", _mutated(_delete(_sub, "dir-name")),
     ["missing field dir-index.sub-dirs-present[0].dir-name"]),
    # Samza's classes require every field but the prev pointer: a lenient reader restored
    # "files-present": null as an EMPTY store over a good one.
    ("files-present-null", _mutated(_set(_root, "files-present", None)),
     ["null in required field dir-index.files-present"]),
    ("files-removed-missing", _mutated(_delete(_root, "files-removed")),
     ["missing field dir-index.files-removed"]),
    ("sub-dirs-present-null", _mutated(_set(_root, "sub-dirs-present", None)),
     ["null in required field dir-index.sub-dirs-present"]),
    ("sub-dir-lists-missing", _mutated(_delete(_sub, "sub-dirs-removed")),
     ["missing field dir-index.sub-dirs-present[0].sub-dirs-removed"]),
    ("root-dir-name-missing", _mutated(_delete(_root, "dir-name")), ["missing field dir-index.dir-name"]),
    ("blobs-null", _mutated(_set(_file0, "blobs", None)), ["null in required field dir-index.files-present[0].blobs"]),
    ("offset-missing", _mutated(lambda d: _file0(d)["blobs"][0].pop("offset")),
     ["missing field dir-index.files-present[0].blobs[0].offset"]),
    ("checksum-missing", _mutated(_delete(_file0, "checksum")), ["missing field dir-index.files-present[0].checksum"]),
    ("permissions-null", _mutated(_set(_meta0, "permissions", None)),
     ["null in required field dir-index.files-present[0].file-metadata.permissions"]),
    ("size-beyond-long", _mutated(_set(_meta0, "size", 2 ** 63)),
     ["dir-index.files-present[0].file-metadata.size does not fit a 64-bit long"]),
    ("size-string-beyond-long", _mutated(_set(_meta0, "size", "99999999999999999999")),
     ["dir-index.files-present[0].file-metadata.size is not a number"]),
    ("size-unicode-digits", _mutated(_set(_meta0, "size", "\u0663")),
     ["dir-index.files-present[0].file-metadata.size is not a number"]),
    ("offset-beyond-long", _mutated(lambda d: _file0(d)["blobs"][0].update(offset=10 ** 30)),
     ["blobs[0].offset does not fit a 64-bit long"]),
    ("creation-time-missing", _mutated(_delete(lambda d: d, "creation-time-millis")),
     ["missing field creation-time-millis"]),
    ("job-name-missing", _mutated(_delete(lambda d: d["snapshot-metadata"], "job-name")),
     ["missing field snapshot-metadata.job-name"]),
    ("store-name-null", _mutated(_set(lambda d: d["snapshot-metadata"], "store-name", None)),
     ["null in required field snapshot-metadata.store-name"]),
]


@pytest.mark.parametrize("data, fragments", [pytest.param(d, f, id=i) for i, d, f in MALFORMED])
def test_malformed_index_raises_index_format_error(data, fragments):
    with pytest.raises(IndexFormatError) as exc:
        parse_index(data)
    message = str(exc.value)
    assert message.startswith("malformed index") or message.startswith("invalid permissions")
    for fragment in fragments:
        assert fragment in message


_UNSAFE_NAMES = ["..", ".", "", "a/b", "/abs", "x\x00y", "a\\b"]


def _put_name(where: str, name: str):
    def fn(doc):
        if where == "files-present":
            _file0(doc)["file-name"] = name
        elif where == "files-removed":
            _root(doc)["files-removed"] = [dict(copy.deepcopy(_file0(doc)), **{"file-name": name})]
        elif where == "sub-dirs-present":
            _sub(doc)["dir-name"] = name
        elif where == "sub-dirs-removed":
            _root(doc)["sub-dirs-removed"] = [dict(copy.deepcopy(_sub(doc)), **{"dir-name": name})]
        elif where == "nested-file":
            _sub(doc)["files-present"][0]["file-name"] = name
        elif where == "nested-dir":
            _sub(doc)["sub-dirs-present"] = [{"dir-name": name, "files-present": [], "files-removed": [],
                                              "sub-dirs-present": [], "sub-dirs-removed": []}]
        elif where == "root-dir-name":
            _root(doc)["dir-name"] = name
    return fn


_WHERE = {
    "files-present": "dir-index.files-present[0]",
    "files-removed": "dir-index.files-removed[0]",
    "sub-dirs-present": "dir-index.sub-dirs-present[0]",
    "sub-dirs-removed": "dir-index.sub-dirs-removed[0]",
    "nested-file": "dir-index.sub-dirs-present[0].files-present[0]",
    "nested-dir": "dir-index.sub-dirs-present[0].sub-dirs-present[0]",
    "root-dir-name": "dir-index",
}


_UNSAFE_CASES = [
    pytest.param(where, name, id=f"{where}-{name!r}")
    for where in _WHERE for name in _UNSAFE_NAMES
    if not (where == "root-dir-name" and name == "")  # the root dir's name is the empty string
]


@pytest.mark.parametrize("where, name", _UNSAFE_CASES)
def test_unsafe_names_raise_unsafe_path_error(where, name):
    with pytest.raises(UnsafePathError) as exc:
        parse_index(_mutated(_put_name(where, name)))
    message = str(exc.value)
    assert repr(name) in message
    assert f"at {_WHERE[where]}:" in message


# ---- queries on a nested index -------------------------------------------------------------------

def test_walk_present(samza_index):
    assert [(p, f.size) for p, f in samza_index.dir_index.walk_present()] == [
        ("CURRENT", 16),
        ("MANIFEST-000014", 1183),
        ("OPTIONS-000016", 7021),
        ("000009.sst", 41533441),
        ("000013.sst", 163574261),
        ("000015.log", 0),
        ("archive/000004.log", 65511),
        ("archive/2024-06-10/000001.log", 1290),
    ]
    assert [p for p, _ in samza_index.dir_index.walk_present("root/")][-1] == "root/archive/2024-06-10/000001.log"


def test_present_dirs(samza_index):
    assert list(samza_index.dir_index.present_dirs()) == ["archive", "archive/2024-06-10"]


def test_present_blob_ids(samza_index):
    assert samza_index.present_blob_ids() == [
        "AAYQAQe0AAoAAQAAAAAAADlB0mPiTw6cRNOBwv1u6n3Bhg",
        "AAYQAQe0AAoAAQAAAAAAADlBKxv9iJ2WTWuHyIFr0PmtVA",
        "AAYQAQe0AAoAAQAAAAAAADlB6c3qg2YrSsO8h3m0R6WJ5g",
        "AAYQAQe0AAoAAQAAAAAAADk-Lx1a5jQ3Qg2x5VgyOm0sUw",
        "AAYQAQe0AAoAAQAAAAAAADlBg4mNZfV6R7yUpN2l0K7S5Q",
        "AAYQAQe0AAoAAQAAAAAAADlBg4nB9TcvS9O_7vRrYQm3LA",
        "AAYQAQe0AAoAAQAAAAAAADlBg4n3VhQsTleO0h4-TmF9fw",
        "AAYQAQe0AAoAAQAAAAAAADk-2yJ3Wk4sQPyh0I5X1nQ2gA",
        "AAYQAQe0AAoAAQAAAAAAADjzG6uD2gWCSk6lyzRn4ZkU4w",
    ]


def test_removed_blob_ids(samza_index):
    # Removed files of the root, then of present sub-dirs, then every file of removed sub-dirs.
    assert samza_index.removed_blob_ids() == [
        "AAYQAQe0AAoAAQAAAAAAADjz0o3mGmGfRH6xjC4Jd6s-Og",  # 000007.sst
        "AAYQAQe0AAoAAQAAAAAAADk-fF8YwBv2QxO3u8n6qP0M1A",  # MANIFEST-000010
        "AAYQAQe0AAoAAQAAAAAAADk-l9yWq1f6Sz6GvFqKqjD7EQ",  # OPTIONS-000012
        "AAYQAQe0AAoAAQAAAAAAADjzq3Sd5Q8IRPKwX7Vw8yGm2w",  # archive/000002.log
        "AAYQAQe0AAoAAQAAAAAAABDzN2pXcRbVQ9K6xq0w4s8HdA",  # lost/000003.sst
    ]
    assert not set(samza_index.removed_blob_ids()) & set(samza_index.present_blob_ids())


def _fi(name: str, blob: str) -> FileIndex:
    return FileIndex(name, (FileBlob(blob, 0),), FileMetadata(0, 0, 1, "u", "g", "rw-r--r--"), 0)


def test_removed_files_of_removed_sub_dirs_are_included_recursively():
    gone = DirIndex("gone", files_present=(_fi("a", "b-a"),), files_removed=(_fi("old", "b-old"),),
                    sub_dirs_present=(DirIndex("deep", files_present=(_fi("c", "b-c"),)),),
                    sub_dirs_removed=(DirIndex("deeper-gone", files_present=(_fi("d", "b-d"),)),))
    kept = DirIndex("kept", files_present=(_fi("k", "b-k"),), files_removed=(_fi("k0", "b-k0"),),
                    sub_dirs_removed=(DirIndex("x", files_present=(_fi("e", "b-e"),)),))
    root = DirIndex("", files_present=(_fi("r", "b-r"),), sub_dirs_present=(kept,), sub_dirs_removed=(gone,))
    index = SnapshotIndex(1, SnapshotMetadata("1-1", "j", "1", "t", "s"), root)
    assert index.removed_blob_ids() == ["b-k0", "b-e", "b-a", "b-old", "b-c", "b-d"]
    assert index.present_blob_ids() == ["b-r", "b-k"]
    stripped = index.without_removed()
    assert stripped.removed_blob_ids() == []
    assert stripped.present_blob_ids() == ["b-r", "b-k"]
    assert stripped.dir_index.sub_dirs_present[0].files_removed == ()
    assert parse_index(serialize_index(index)) == index


def test_without_removed_on_samza_file(samza_index):
    stripped = samza_index.without_removed()
    assert stripped.removed_blob_ids() == []
    assert list(stripped.dir_index.walk_present()) == list(samza_index.dir_index.walk_present())
    assert stripped.snapshot_metadata == samza_index.snapshot_metadata
    assert stripped.prev_snapshot_index_blob_id == samza_index.prev_snapshot_index_blob_id


# ---- permissions ---------------------------------------------------------------------------------

PERMISSIONS = [
    (0o644, "rw-r--r--"),
    (0o600, "rw-------"),
    (0o755, "rwxr-xr-x"),
    (0o700, "rwx------"),
    (0o444, "r--r--r--"),
    (0o777, "rwxrwxrwx"),
    (0o000, "---------"),
    (0o421, "r---w---x"),
    (0o124, "--x-w-r--"),
]


@pytest.mark.parametrize("mode, perms", PERMISSIONS, ids=[p for _, p in PERMISSIONS])
def test_permissions_round_trip(mode, perms):
    assert mode_to_permissions(mode) == perms
    assert permissions_to_mode(perms) == mode
    assert FileMetadata(0, 0, 0, "u", "g", perms).mode == mode


@pytest.mark.parametrize("mode, perms", [
    (0o100644, "rw-r--r--"),  # a regular file's st_mode: the type bits are dropped
    (0o040755, "rwxr-xr-x"),  # a directory
    (0o4755, "rwxr-xr-x"),  # setuid has no place in the string
    (0o1777, "rwxrwxrwx"),  # nor sticky
])
def test_mode_to_permissions_keeps_only_permission_bits(mode, perms):
    assert mode_to_permissions(mode) == perms


@pytest.mark.parametrize("perms", ["", "rw-r--r", "rw-r--r---", "rwxrwxrwt", "rwsr-xr-x", "RW-R--R--",
                                   "0644", "wr-r--r--", "rw r--r--"])
def test_invalid_permissions(perms):
    with pytest.raises(IndexFormatError) as exc:
        permissions_to_mode(perms)
    assert str(exc.value) == f"invalid permissions {perms!r} in index"


_EMPTY_LISTS = '"files-present":[],"files-removed":[],"sub-dirs-removed":[],'


@pytest.mark.parametrize("data", [
    "[" * 100_000,
    '{"creation-time-millis":1,"snapshot-metadata":{"checkpoint-id":"1-1","job-name":"j","job-id":"1",'
    '"task-name":"t","store-name":"s"},"dir-index":{"dir-name":"",' + _EMPTY_LISTS + '"sub-dirs-present":['
    + ('{"dir-name":"d",' + _EMPTY_LISTS + '"sub-dirs-present":[') * 400 + "]}" * 400 + "]}}",
], ids=["deep-json", "deep-dirs"])
def test_absurdly_deep_nesting_is_a_format_error_not_a_crash(data):
    with pytest.raises(IndexFormatError) as exc:
        parse_index(data)
    assert str(exc.value) in ("malformed index: JSON nested too deeply",
                              "malformed index: directories nested too deeply")


def test_index_is_written_as_jackson_writes_it():
    """Control characters as upper-case \\u escapes, non-ASCII and '/' as they are, no spaces."""
    doc = _minimal()
    _file0(doc)["file-name"] = "a\x1fb\u00e9/"[:-1]
    _meta0(doc)["owner"] = "s\tam/za"
    out = serialize_index(parse_index(json.dumps(doc)))
    assert b'"file-name":"a\\u001Fb\xc3\xa9"' in out
    assert b'"owner":"s\\tam/za"' in out
    assert b" " not in out.replace(b"Partition 0", b"")
    assert parse_index(out) == parse_index(json.dumps(doc))


def test_non_bmp_and_control_characters_are_written_as_jackson_writes_them():
    """UTF8JsonGenerator (writeValueAsBytes) escapes each UTF-16 surrogate: a non-BMP character becomes an
    escaped pair, upper-case hex; the rest of the BMP is written as UTF-8."""
    doc = _minimal()
    _file0(doc)["file-name"] = "smile\U0001F600\x1f\u2028\u00e9"
    _meta0(doc)["group"] = "\U00010000\x7f"
    index = parse_index(json.dumps(doc))
    out = serialize_index(index)
    assert b'"file-name":"smile\\uD83D\\uDE00\\u001F\xe2\x80\xa8\xc3\xa9"' in out
    assert b'"group":"\\uD800\\uDC00\x7f"' in out
    assert parse_index(out) == index
