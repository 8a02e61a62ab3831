"""catalog.listing: what a blob store's catalog holds, level by level, and the unknown-name error naming the
nearest names, on a real file:// blob store with catalog records written as backups write them (the CLI
and SeaweedFS: tests/integration/test_snapshots_list.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from statectl.blobstore import open_blobstore
from statectl.blobstore.base import BlobStore
from statectl.catalog.listing import CatalogTree, check_known
from statectl.catalog.records import PENDING, BlobCheckpointStore, CheckpointRecord
from statectl.catalog.refs import StoreRef
from statectl.errors import SnapshotNotFoundError


@pytest.fixture
def catalog(tmp_path) -> Iterator[BlobCheckpointStore]:
    bs: BlobStore = open_blobstore(f"file://{tmp_path / 'blobs'}")
    cps = BlobCheckpointStore(bs)
    records = [
        (StoreRef("page-views", "1", "Partition 0", "counts"), "1700000000000-1"),
        (StoreRef("page-views", "1", "Partition 0", "counts"), "1700000000500-2"),
        (StoreRef("page-views", "1", "Partition 1", "counts"), "1700000000100-3"),
        (StoreRef("page-views", "1", "Partition 0", "totals"), "1700000000200-4"),
        (StoreRef("page-views", "7", "Partition 0", "counts"), "1700000000300-5"),
        (StoreRef("a job with spaces", "1", "Partition 0", "s"), "1700000000400-6"),
    ]
    for ref, cid in records:
        cps.write(ref, CheckpointRecord(cid, f"blobs/00/{cid}", 1, state=PENDING if cid.endswith("-4") else "committed"))
    bs.put_at("checkpoints/page-views/1/Partition%200/counts/not-a-checkpoint.json", b"{}")  # not ours
    bs.put_at("checkpoints/notes.txt", b"x")
    bs.put_at("checkpoints/ghost/1/Partition%200/s/readme.json", b"{}")  # no checkpoint: no job "ghost"
    yield cps
    bs.close()


def test_the_tree_of_every_job_from_one_listing(catalog: BlobCheckpointStore):
    tree = CatalogTree.read(catalog)
    assert tree.jobs() == [("a job with spaces", "1"), ("page-views", "1"), ("page-views", "7")]
    refs = tree.refs("page-views", "1")
    assert [(r.store, r.task) for r in refs] == [("counts", "Partition 0"), ("counts", "Partition 1"),
                                                 ("totals", "Partition 0")]
    # Newest first, pending records included (the listing reads no record).
    assert tree.checkpoints[refs[0]] == ["1700000000500-2", "1700000000000-1"]
    assert tree.checkpoints[refs[2]] == ["1700000000200-4"]
    assert [(r.store, r.task) for r in tree.refs("page-views", "1", "totals")] == [("totals", "Partition 0")]


def test_the_tree_of_one_job_lists_only_its_records(catalog: BlobCheckpointStore):
    tree = CatalogTree.read(catalog, "page-views")
    assert tree.jobs() == [("page-views", "1"), ("page-views", "7")]
    assert CatalogTree.read(catalog, "a job with spaces").jobs() == [("a job with spaces", "1")]
    assert CatalogTree.read(catalog, "page").jobs() == []  # a prefix of a name is not the job


@pytest.mark.parametrize("args, message, hint", [
    (("page-veiws", "1"), "unknown job 'page-veiws'", "did you mean 'page-views'?"),
    (("zzzzzzzz", "1"), "unknown job 'zzzzzzzz'", "the jobs: 'a job with spaces', 'page-views'"),
    (("page-views", "2"), "job 'page-views' has no snapshots with job id '2'", "its job ids there: 1, 7"),
    (("page-views", "1", "count"), "unknown store 'count' of job 'page-views' (id 1)", "did you mean 'counts'?"),
    (("page-views", "7", "totals"), "unknown store 'totals' of job 'page-views' (id 7)",
     "did you mean 'counts'?"),
    (("page-views", "1", "totals", "Partition 1"), "unknown task 'Partition 1' of store 'totals'",
     "did you mean 'Partition 0'?"),
    (("a job with spaces", "1", "t"), "unknown store 't' of job 'a job with spaces' (id 1)",
     "the stores of the job: 's' (\"statectl snapshots list --job 'a job with spaces'\" lists them)"),
])
def test_an_unknown_name_names_the_nearest(catalog: BlobCheckpointStore, args, message, hint):
    with pytest.raises(SnapshotNotFoundError) as e:
        check_known(catalog, *args)
    assert str(e.value).startswith(message) and catalog.blobstore.url in str(e.value)
    assert e.value.exit_code == 10 and (e.value.hint or "").startswith(hint), e.value.hint


def test_known_names_pass(catalog: BlobCheckpointStore):
    check_known(catalog, "page-views", "1")
    check_known(catalog, "page-views", "1", "totals")          # a pending record: the store is known
    check_known(catalog, "page-views", "1", "counts", "Partition 1")


def test_an_empty_blob_store_says_so(tmp_path):
    bs = open_blobstore(f"file://{tmp_path / 'empty'}")
    try:
        with pytest.raises(SnapshotNotFoundError, match="unknown job 'pv'") as e:
            check_known(BlobCheckpointStore(bs), "pv", "1")
        assert e.value.hint == "the blob store holds no snapshots at all: check --blobstore"
    finally:
        bs.close()
