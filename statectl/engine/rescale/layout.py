"""What a rescale checks before it reads a key (statectl.engine.rescale): that its sources are the layout the
command assumes, so that the targets can hold the whole state and nothing but it.

- The store has no snapshot of a task besides the sources: ``--from N`` must name every task that holds state
  (tasks whose latest snapshots a recorded scale-in of the store read are left-overs, not state).
- Every source's keys belong to its own task under the ``--from`` partitioning. From each source's MANIFEST
  (statectl.rocks.manifest), before any Spark job: a hash-partitioned source's files' smallest and largest
  keys must route to it; a key-group source's files must reach into its own key groups. The executors then
  check every key of the hash path as they read it (statectl.spark.rescale_reader).

A refusal (LayoutError, exit 1) names the first task, file or key that does not fit; nothing is written.
"""

from __future__ import annotations

import io
from typing import Any

from statectl.blobstore.base import BlobStore
from statectl.catalog.records import BlobCheckpointStore
from statectl.catalog.refs import StoreRef
from statectl.errors import CorruptSnapshotError, SnapshotNotFoundError, StatectlError

class LayoutError(StatectlError):
    """The sources are not the layout the rescale assumes (exit 1); nothing was written."""


def check_other_tasks(checkpoints: BlobCheckpointStore, job: str, job_id: str, store: str, sources: list[str],
                      leftovers: dict[str, str]) -> None:
    """LayoutError when a task of ``job``'s ``store`` besides ``sources`` has a committed snapshot, unless its
    latest is the one ``leftovers`` names for it (what a recorded scale-in read)."""
    from statectl.catalog.listing import CatalogTree

    tree = CatalogTree.read(checkpoints, job, job_id=job_id)
    others = []
    for ref in tree.refs(job, job_id, store):
        if ref.task in sources:
            continue
        latest = latest_id(checkpoints, ref)
        if latest is not None and latest != leftovers.get(ref.task):
            others.append(ref.task)
    if others:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise LayoutError(f"store {store} of {job} has snapshots of {len(others)} task{'s' * (len(others) > 1)} "
                          f"besides the {len(sources)} of --from ({shown}): the rescale would leave their state out",
                          hint="give --from the number of tasks that wrote the snapshots (with --task-map, name them "
                               "all); if those tasks' snapshots are left over from an earlier scale-in, pass "
                               "--ignore-other-tasks")


def latest_id(checkpoints: BlobCheckpointStore, ref: StoreRef) -> str | None:
    """The index blob id of ``ref``'s latest committed snapshot, None when it has none."""
    try:
        latest = checkpoints.latest(ref)
    except SnapshotNotFoundError:  # e.g. the job's checkpoint topic does not exist yet
        return None
    return latest.index_blob_id if latest is not None else None


def _file_bytes(blobstore: BlobStore, fi: Any) -> bytes:
    """A small file of a snapshot (CURRENT, a MANIFEST), read whole from its blobs."""
    buf = io.BytesIO()
    for b in sorted(fi.blobs, key=lambda b: b.offset):
        blobstore.get(b.blob_id, buf)
    return buf.getvalue()


def has_wal(index: Any) -> bool:
    """Whether a snapshot holds a non-empty WAL: entries its MANIFEST does not account for."""
    return any(rel.endswith(".log") and fi.file_metadata.size > 0 for rel, fi in index.dir_index.walk_present())


def source_manifest(blobstore: BlobStore, index: Any, task: str) -> Any:
    """The source's live files from its snapshot's MANIFEST, each checked against the index (present, same
    size). CorruptSnapshotError (exit 1) when the snapshot is not a RocksDB store, its MANIFEST is damaged or
    names a file the snapshot lacks."""
    from statectl.rocks.manifest import ManifestError, read_manifest

    files = dict(index.dir_index.walk_present())
    try:
        current = _file_bytes(blobstore, files["CURRENT"]).decode().strip()
        if not current.startswith("MANIFEST-") or current not in files:
            raise ManifestError(f"CURRENT names {current!r}, which the snapshot does not hold")
        m = read_manifest(_file_bytes(blobstore, files[current]))
    except (KeyError, UnicodeDecodeError) as e:
        raise CorruptSnapshotError(f"the snapshot of {task} is not a RocksDB store: no {e}",
                                   hint="nothing was uploaded or committed") from None
    except ManifestError as e:
        raise CorruptSnapshotError(f"the snapshot of {task}: {e}", hint="nothing was uploaded or committed") from None
    for f in m.files.values():
        fi = files.get(f.name)
        if fi is None or fi.file_metadata.size != f.size:
            raise CorruptSnapshotError(f"the snapshot of {task} is damaged: its MANIFEST lists {f.name} of {f.size} "
                                       "bytes, its index " + ("does not hold it" if fi is None else
                                                              f"says {fi.file_metadata.size} bytes"),
                                       hint="nothing was uploaded or committed")
    return m


def check_hash_layout(manifests: list[Any], tasks: list[str], partitioner: str | None) -> None:
    """LayoutError unless the smallest and largest key of every file of source ``i`` (``manifests[i]``) routes
    to task ``i`` of ``len(tasks)`` under ``partitioner`` (statectl.spark.rescale_reader.load_partitioner's name)."""
    from statectl.rocks.manifest import RANGE_DELETION
    from statectl.spark.rescale_reader import load_partitioner

    route = load_partitioner(partitioner)
    n = len(tasks)
    for i, (task, m) in enumerate(zip(tasks, manifests)):
        for f in m.live_files:
            for bound in (f.smallest, f.largest):
                if bound[-8] == RANGE_DELETION:  # a range deletion's bound: any key it chose, not one written
                    continue
                key = bound[:-8]
                try:
                    j = route(key, n)
                except Exception as e:
                    raise StatectlError(f"partitioner {partitioner}: {type(e).__name__}: {e}") from None
                if j != i:
                    owner = tasks[j] if isinstance(j, int) and 0 <= j < n else repr(j)
                    raise LayoutError(f"the sources are not a {n}-way layout by {partitioner or 'murmur2'}: key "
                                      f"{key[:40]!r} of {task} (in {f.name}) belongs to {owner}",
                                      hint=LAYOUT_HINT)


LAYOUT_HINT = ("nothing was written. --from must be the number of tasks that wrote the snapshots; the partitioner "
               "that placed the keys is --from-partitioner (default: --partitioner); is this store already "
               "rescaled? (see 'statectl snapshots list')")


def check_key_group_layout(manifests: list[Any], tasks: list[str], groups: int) -> None:
    """LayoutError when a file of source ``i`` lies wholly outside the key groups task ``i`` of ``len(tasks)``
    owns (one reaching past them is a store Flink clips: the rescale reads only the source's own groups).
    A file bounded by a range deletion says nothing of who wrote it (a rescale's targets hold such files for
    the key groups they clip off); files without valid key-group prefixes are left to keygroup_plan.plan,
    which refuses them."""
    from statectl.formats.keygroups import KeyGroupError, key_group, task_range

    n = len(tasks)
    for i, (task, m) in enumerate(zip(tasks, manifests)):
        first, last = task_range(i, n, groups)
        for f in m.live_files:
            if f.bounded_by_range_deletion:
                continue
            try:
                a, b = key_group(f.smallest_key, groups), key_group(f.largest_key, groups)
            except KeyGroupError:
                continue
            if b < first or a > last:
                owns = f"key groups {first}..{last}" if first <= last else "no key group"
                raise LayoutError(f"the sources are not a {n}-way layout of {groups} key groups: {f.name} of {task} "
                                  f"holds key groups {a}..{b}, and {task}, task {i} of {n}, owns {owns}",
                                  hint="nothing was written. --from must be the number of tasks that wrote the "
                                       "snapshots, --key-groups the store's number of key groups (Flink's max "
                                       "parallelism); is this store already rescaled? (see 'statectl snapshots "
                                       "list')")


def check_sources(opts: Any, blobstore: BlobStore, checkpoints: BlobCheckpointStore, indexes: list[Any],
                  leftovers: dict[str, str]) -> list[Any]:
    """Every check above for a rescale's options (statectl.engine.rescale.options.RescaleOptions) and its
    sources' indexes; ``leftovers`` as check_other_tasks takes them. Returns the sources' MANIFESTs."""
    tasks = opts.source_tasks
    if not opts.ignore_other_tasks:
        check_other_tasks(checkpoints, opts.job, opts.job_id, opts.store, tasks, leftovers)
    from concurrent.futures import ThreadPoolExecutor

    # every MANIFEST read at once; the first source in order that fails raises
    with ThreadPoolExecutor(max(1, min(len(tasks), opts.parallelism)), thread_name_prefix="statectl-manifests") as pool:
        manifests = list(pool.map(lambda it: source_manifest(blobstore, *it), zip(indexes, tasks)))
    if opts.key_groups is None:
        check_hash_layout(manifests, tasks, opts.source_partitioner)
    else:
        check_key_group_layout(manifests, tasks, opts.key_groups)
    return manifests
