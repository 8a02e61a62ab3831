"""statectl snapshots list | show | verify"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from statectl.cli.common import (
    BLOBSTORE,
    STORE_REF,
    Env,
    exit_codes_epilog,
    human_bytes,
    print_json,
    state_command,
)
from statectl.errors import CorruptSnapshotError, UsageError

app = typer.Typer(help="List, inspect and verify snapshots.", no_args_is_help=True, rich_markup_mode=None)

# The flags that name a task's store in the catalog: list, show and verify take them all.
SNAPSHOT_FLAGS = (*BLOBSTORE, "kafka", *STORE_REF)


@app.command("list", epilog="Example:\n\n  statectl snapshots list --job page-views --store counts --task 'Partition 0'")
@state_command(*SNAPSHOT_FLAGS)
def list_(env: Env) -> None:
    """List the snapshots of a task's store, newest first."""
    from statectl.engine.snapshots import list_snapshots

    session = env.session
    rows = list_snapshots(session.ref(), session.blobstore, session.catalog)
    lines = [f"{'SNAPSHOT':<48} {'CHECKPOINT':<22} {'CREATED':<21} {'FILES':>6} {'SIZE':>10}"]
    for r in rows:
        files = "-" if r.files is None else str(r.files)
        lines.append(f"{r.snapshot_id:<48} {r.checkpoint_id:<22} {r.created or '-':<21} {files:>6} "
                     f"{human_bytes(r.bytes):>10}" + (f"  ({r.problem})" if r.problem else ""))
    env.emit(rows, "\n".join(lines) if rows else "no snapshots")


@app.command("show", epilog="Examples:\n\n  statectl snapshots show --job page-views --store counts\n\n"
                            "  statectl snapshots show --index-file index.json   # an index blob saved from a Samza job\n\n"
                            + exit_codes_epilog(0, (1, "malformed index"), 10))
@state_command(*SNAPSHOT_FLAGS)
def show(
    snapshot: Annotated[Optional[str], typer.Argument(help="Snapshot id, id prefix or checkpoint id (default: the latest).", show_default=False)] = None,
    index_file: Annotated[Optional[Path], typer.Option("--index-file", help="Read the index from this file instead of the blob store.", show_default=False)] = None,
    *,
    env: Env,
) -> None:
    """Show one snapshot's index: its metadata and files (as Samza JSON with --output json)."""
    from statectl.engine.snapshots import read_index_file, show_snapshot
    from statectl.snapshot.model import index_to_json

    session = env.session
    if index_file is not None:
        if snapshot is not None:
            raise UsageError("give a snapshot id or --index-file, not both")
        index, label = read_index_file(index_file), str(index_file)
    else:
        snap = show_snapshot(session.ref(), session.blobstore, session.catalog, snapshot)
        index, label = snap.index, snap.index_blob_id
    if env.json:
        print_json(index_to_json(index))
        return
    m = index.snapshot_metadata
    files = list(index.dir_index.walk_present())
    lines = [
        f"snapshot:   {label}",
        f"checkpoint: {m.checkpoint_id}",
        f"job:        {m.job_name} (id {m.job_id})",
        f"task/store: {m.task_name} / {m.store_name}",
        f"created:    {index.creation_time_millis} ms",
        f"previous:   {index.prev_snapshot_index_blob_id or '-'}",
        f"files:      {len(files)}, {human_bytes(sum(f.size for _, f in files))}",
    ]
    for rel, f in files:
        lines.append(f"  {f.file_metadata.permissions} {f.size:>12} {f.checksum:>10} {rel} ({len(f.blobs)} blobs)")
    removed = list(index.dir_index.removed_files())
    if removed:
        lines.append(f"removed since previous: {len(removed)} files")
    env.emit(index, "\n".join(lines))


@app.command("verify", epilog="Examples:\n\n  statectl snapshots verify --job page-views --store counts\n\n"
                              "  statectl snapshots verify 3f2a9c --download --job page-views --store counts\n\n"
                              + exit_codes_epilog((0, "every blob present (and every CRC right)"),
                                                  (1, "problems found"), 10))
@state_command(*SNAPSHOT_FLAGS, "parallelism")
def verify(
    snapshot: Annotated[Optional[str], typer.Argument(help="Snapshot id, id prefix or checkpoint id (default: the latest).", show_default=False)] = None,
    download: Annotated[bool, typer.Option("--download", help="Also download every blob and check each file's CRC32.")] = False,
    *,
    env: Env,
) -> None:
    """Check that every blob of a snapshot exists with the right size (and with --download, the right CRC32)."""
    from statectl.engine.snapshots import verify_snapshot

    session = env.session
    r = verify_snapshot(session.ref(), session.blobstore, session.catalog, snapshot, download=download,
                        parallelism=env.settings.parallelism, progress=env.progress)
    lines = [f"missing: {p.path} ({p.blob_id})" for p in r.missing]
    lines += [f"corrupt: {p.path} {p.blob_id} {p.reason}".replace("  ", " ") for p in r.corrupt]
    what = "blobs present, CRCs match" if download else "blobs present with the right sizes"
    lines.append(f"{'ok' if r.ok else 'FAILED'}: snapshot {r.snapshot_id}, {r.files} files, {r.blobs} blobs"
                 + (f": {what}" if r.ok else f": {len(r.missing)} missing, {len(r.corrupt)} corrupt"))
    env.emit(r, "\n".join(lines))
    if not r.ok:
        # The result (stdout) lists each problem; stderr says in one line that the check failed.
        raise CorruptSnapshotError(f"snapshot {r.snapshot_id} failed verification: "
                                   f"{len(r.missing)} missing, {len(r.corrupt)} corrupt")
