"""statectl snapshots list | show | verify | copy: the catalog's snapshots, read, checked and cloned."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import typer

from statectl.cli.base import exit_codes_epilog
from statectl.cli.common import BLOBSTORE, STORE_REF, Env, human_bytes, print_json, state_command
from statectl.errors import BlobStoreMissingError, CorruptSnapshotError, PartialError, UsageError, command

app = typer.Typer(help="List, inspect and verify snapshots.", no_args_is_help=True, rich_markup_mode=None)

# The flags that name a task's store in the catalog: list, show and verify take them all.
SNAPSHOT_FLAGS = (*BLOBSTORE, "kafka", *STORE_REF)


@app.command("list", epilog="Examples:\n\n"
                            "  statectl snapshots list   # the jobs the blob store holds snapshots of\n\n"
                            "  statectl snapshots list --job page-views   # the job's stores and tasks\n\n"
                            "  statectl snapshots list --job page-views --store counts --task 'Partition 0'\n\n"
                            + exit_codes_epilog(0, 2, (10, "unknown job, job id, store or task")))
@state_command(*SNAPSHOT_FLAGS)
def list_(env: Env) -> None:
    """List what the blob store holds, one level at a time: without --job, the jobs; with --job, the job's
    stores and their tasks (with --task, only that task's); with --job and --store, the snapshots of the
    store of --task, newest first.
    A job, store or task the blob store holds nothing of is an error (exit 10) naming the nearest ones.
    Read-only."""
    from statectl.engine.snapshots import list_jobs, list_snapshots, list_tasks

    session, s = env.session, env.settings
    where = f"blob store {s.blobstore}"
    if not s.job:
        if s.store:
            raise UsageError("--store needs --job", hint=(
                command("snapshots list", without=("job", "job_id", "task", "store")), " lists the jobs"))
        jobs = list_jobs(session.catalog)
        lines = [f"{'JOB':<32} {'JOB ID':<8} {'TASKS':>6} {'CHECKPOINTS':>11} {'LATEST':<21} STORES"]
        lines += [f"{j.job:<32} {j.job_id:<8} {j.tasks:>6} {j.checkpoints:>11} {j.latest_checkpoint_time or '-':<21} "
                  f"{','.join(j.stores)}" for j in jobs]
        env.emit(jobs, (f"jobs in {where}:\n" + "\n".join(lines)) if jobs else f"no jobs in {where}")
        return
    if not s.store:
        tasks = list_tasks(session.catalog, s.job, s.job_id, task=env.flags.task)
        lines = [f"{'STORE':<24} {'TASK':<20} {'SNAPSHOTS':>9} {'LATEST':<21} LATEST SNAPSHOT"]
        lines += [f"{t.store:<24} {t.task:<20} {t.snapshots:>9} {t.created or '-':<21} {t.latest_snapshot_id or '-'}"
                  for t in tasks]
        env.emit(tasks, f"stores and tasks of job {s.job} (id {s.job_id}) in {where}:\n" + "\n".join(lines))
        return
    ref = session.ref()
    rows = list_snapshots(ref, session.blobstore, session.catalog)
    lines = [f"{'SNAPSHOT':<48} {'CHECKPOINT':<22} {'CREATED':<21} {'FILES':>6} {'SIZE':>10}"]
    for r in rows:
        files = "-" if r.files is None else str(r.files)
        lines.append(f"{r.snapshot_id:<48} {r.checkpoint_id:<22} {r.created or '-':<21} {files:>6} "
                     f"{human_bytes(r.bytes):>10}" + (f"  ({r.problem})" if r.problem else ""))
    env.emit(rows, f"snapshots of {ref} in {where}:\n" + "\n".join(lines) if rows
             else f"no committed snapshots of {ref} in {where}")


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
    """Show one snapshot's index: its metadata and files (as Samza JSON with --output json). Read-only."""
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
        f"blob store: {'-' if index_file is not None else session.blobstore.url}",
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
    """Check that every blob of a snapshot exists with the right size (and with --download, the right CRC32).

    Read-only: --download reads every blob and keeps nothing on disk."""
    from statectl.engine.snapshots import verify_snapshot

    session = env.session
    r = verify_snapshot(session.ref(), session.blobstore, session.catalog, snapshot, download=download,
                        parallelism=env.settings.parallelism, progress=env.progress)
    lines = [f"missing: {p.path} ({p.blob_id})" for p in r.missing]
    lines += [f"corrupt: {p.path} {p.blob_id} {p.reason}".replace("  ", " ") for p in r.corrupt]
    what = "blobs present, CRCs match" if download else "blobs present with the right sizes"
    lines.append(f"{'ok' if r.ok else 'FAILED'}: snapshot {r.snapshot_id} in {r.blobstore}, {r.files} files, "
                 f"{r.blobs} blobs"
                 + (f": {what}" if r.ok else f": {len(r.missing)} missing, {len(r.corrupt)} corrupt"))
    env.emit(r, "\n".join(lines))
    if not r.ok:
        # The result (stdout) lists each problem; stderr says in one line that the check failed.
        raise CorruptSnapshotError(f"snapshot {r.snapshot_id} failed verification: "
                                   f"{len(r.missing)} missing, {len(r.corrupt)} corrupt")


@app.command("copy", epilog="Examples:\n\n"
                            "  statectl snapshots copy --job page-views --store counts --task 'Partition 0' "
                            "--to-job page-views-staging\n\n"
                            "  statectl snapshots copy --job page-views --all --to-job page-views-staging --dry-run\n\n"
                            + exit_codes_epilog(0, (1, "a blob is missing; nothing committed"), 2,
                                                (3, "some tasks failed"), (10, "no such snapshot"),
                                                (11, "a backup of the target runs"), 12))
@state_command(*SNAPSHOT_FLAGS, "parallelism", "limit_rate", "ttl", "keep_last", "grace", "create")
def copy(
    snapshot: Annotated[Optional[str], typer.Argument(help="Snapshot id, id prefix or checkpoint id (default: the latest).", show_default=False)] = None,
    to_job: Annotated[Optional[str], typer.Option("--to-job", help="The target's job (default: --job).", show_default=False)] = None,
    to_job_id: Annotated[Optional[str], typer.Option("--to-job-id", help="The target's job id (default: --job-id).", show_default=False)] = None,
    to_task: Annotated[Optional[str], typer.Option("--to-task", help="The target's task (default: --task).", show_default=False)] = None,
    to_store: Annotated[Optional[str], typer.Option("--to-store", help="The target's store (default: --store).", show_default=False)] = None,
    to_blobstore: Annotated[Optional[str], typer.Option("--to-blobstore", help="The target's blob store (default: --blobstore).", show_default=False)] = None,
    to_s3_endpoint: Annotated[Optional[str], typer.Option("--to-s3-endpoint", help="Its S3 endpoint (default: --s3-endpoint).", show_default=False)] = None,
    to_sse: Annotated[Optional[Literal["AES256", "aws:kms"]], typer.Option("--to-sse", help="Its S3 encryption (default: the source's).", show_default=False)] = None,
    to_sse_kms_key_id: Annotated[Optional[str], typer.Option("--to-sse-kms-key-id", help="The target's KMS key, with aws:kms.", show_default=False)] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Write nothing; print the plan.")] = False,
    file_owner: Annotated[Optional[str], typer.Option("--file-owner", metavar="USER:GROUP", help="The owner recorded for every file (default: the source's).", show_default=False)] = None,
    all_tasks: Annotated[bool, typer.Option("--all-tasks", help="Every task of --store.")] = False,
    all_stores: Annotated[bool, typer.Option("--all", help="Every store and task of --job.")] = False,
    *,
    env: Env,
) -> None:
    """Clone a snapshot into another job, task or store, server-side.

    Writes copies, an index and the target's record; never the source. Across endpoints the blobs
    stream through this host (--limit-rate). More: man statectl-snapshots-copy."""
    from dataclasses import replace

    from statectl.engine.copy import CopyOptions, copy_snapshot, plan_copy

    session, s = env.session, env.settings
    session.create_blobstore = False  # --create starts the target (--to-blobstore) only: the source must exist
    if all_tasks or all_stores:
        _check_copy_all(env, all_stores, all_tasks, snapshot, to_task, to_store)
    source_ref = session.ref(need_store=not all_stores)
    target_ref = replace(source_ref, job=to_job or source_ref.job, job_id=to_job_id or source_ref.job_id,
                         task=to_task or source_ref.task, store=to_store or source_ref.store)
    opts = CopyOptions(source=source_ref, target=target_ref, snapshot=snapshot, parallelism=s.parallelism,
                       ttl_seconds=s.ttl, keep_last=s.keep_last, grace_seconds=s.grace, file_owner=file_owner,
                       rate_limit=session.rate_limit)
    target, target_catalog, opened = _copy_target(env, to_blobstore, to_s3_endpoint,
                                                  _target_sse(env, to_sse, to_sse_kms_key_id), dry_run)
    try:
        if all_tasks or all_stores:
            _copy_all(env, opts, target, target_catalog, all_stores, dry_run)
            return
        if dry_run:
            plan = plan_copy(opts, session.blobstore, session.catalog, target, env.progress)
            env.emit(plan, _copy_plan_text(plan))
            return
        r = copy_snapshot(opts, session.blobstore, session.catalog, target, target_catalog, env.progress)
    except BlobStoreMissingError as e:
        raise _missing_store(e, target if opened is not None else None) from None
    finally:
        if opened is not None:
            opened.close()
    env.emit(r, _copy_line(r, source_ref))


def _check_copy_all(env: Env, all_stores: bool, all_tasks: bool, snapshot: str | None, to_task: str | None,
                    to_store: str | None) -> None:
    flag = "--all" if all_stores else "--all-tasks"
    if all_stores and all_tasks:
        raise UsageError("give --all (every store) or --all-tasks (every task of --store), not both")
    if all_tasks and not env.settings.store:
        raise UsageError("--all-tasks needs --store", hint="--all copies every store of the job")
    mine = ("task", "store") if all_stores else ("task",)  # the source's: each task's (and store's) own
    given = [f for f, on in (("a snapshot id", snapshot is not None), ("--to-task", to_task),
                             ("--to-store", all_stores and to_store)) if on]
    given += [f"--{name}" for name in mine if getattr(env.flags, name)]
    if given:
        raise UsageError(f"{flag} copies the latest snapshot of each task into the same task"
                         + (" and store" if all_stores else "") + f"; do not combine it with {', '.join(given)}")


def _copy_all(env: Env, opts: Any, target: Any, target_catalog: Any, all_stores: bool, dry_run: bool) -> None:
    from dataclasses import replace

    from statectl.engine.copy import copy_all

    session = env.session
    r = copy_all(opts, session.blobstore, session.catalog, target, target_catalog, env.progress,
                 all_stores=all_stores, dry_run=dry_run)
    lines = [_copy_plan_text(x).splitlines()[-1] if dry_run else
             _copy_line(x, replace(opts.source, task=x.task, store=x.store)) for x in r.results]
    lines += [f"FAILED {what}: {err}" for what, err in r.failures]
    env.emit(r, "\n".join(lines))
    if r.failures:
        raise PartialError(f"{len(r.failures)} of {len(r.failures) + len(r.results)} tasks failed to copy"
                           + (" (dry run)" if dry_run else ""))


def _copy_line(r: Any, source: Any) -> str:
    """One copy's result line; ``source`` is the StoreRef it copied from."""
    from dataclasses import replace

    how = "server-side" if r.server_side else "streamed through this host"
    target = replace(source, job=r.job, job_id=r.job_id, task=r.task, store=r.store)
    where = f"{source}" if r.to_blobstore == r.blobstore else f"{source} in {r.blobstore}"
    return (f"copied snapshot {r.source_snapshot_id} from {where} to {target} in {r.to_blobstore}: "
            f"new snapshot {r.snapshot_id} (checkpoint {r.checkpoint_id}); {r.blobs_copied} blobs, "
            f"{human_bytes(r.bytes_copied)} copied {how}, {human_bytes(r.bytes_through_client)} through this "
            f"host, {r.duration_s:.1f}s")


def _missing_store(e: BlobStoreMissingError, target: Any) -> BlobStoreMissingError:
    """A copy's missing blob store said with copy's own flags: --to-blobstore and copy --create start the
    target; the source (--blobstore) must exist."""
    if target is not None and e.url == target.url:
        hint = (("check --to-blobstore; to start a new blob store there, run ", command("snapshots copy", "--create"),
                 " (or create the dir)") if e.url.startswith("file:") else
                "create the bucket, or check --to-blobstore and --to-s3-endpoint")
        return BlobStoreMissingError(f"{e} (the target, --to-blobstore)", url=e.url, hint=hint)
    return BlobStoreMissingError(f"{e} (the source, --blobstore)", url=e.url,
                                 hint="check --blobstore (and --s3-endpoint): a copy's source must exist")


def _target_sse(env: Env, to_sse: str | None, to_key: str | None) -> dict[str, str | None]:
    """The target's encryption: --to-sse, else the source's; its KMS key --to-sse-kms-key-id, else the
    source's when both are aws:kms. UsageError for a key without aws:kms, or one that is no key id."""
    from statectl.config import KEYS

    s = env.settings
    sse = to_sse or s.sse
    if to_key is not None:
        try:
            to_key = KEYS["sse_kms_key_id"].parse(to_key)
        except ValueError as e:
            raise UsageError(f"--to-sse-kms-key-id: invalid value {to_key!r} ({e})") from None
        if sse != "aws:kms":
            raise UsageError(f"--to-sse-kms-key-id needs --to-sse aws:kms, not {sse or 'none'}",
                             hint="add --to-sse aws:kms; AES256 encrypts with S3's own keys and takes no KMS key")
    return {"sse": sse, "sse_kms_key_id": to_key or (s.sse_kms_key_id if sse == s.sse else None)}


def _copy_target(env: Env, to_blobstore: str | None, to_s3_endpoint: str | None, sse: dict[str, str | None],
                 dry_run: bool) -> tuple[Any, Any, Any]:
    """The blob store and catalog a copy writes to, and the store opened for it (the caller closes it;
    None when the target is the session's own store)."""
    from dataclasses import replace

    session, s = env.session, env.settings
    own = session.blobstore, session.catalog  # the source store opens first, whatever the target
    # The engine tells the source store under another name (identity); another encryption needs a store of its own.
    if not (to_blobstore or to_s3_endpoint) and (sse["sse"], sse["sse_kms_key_id"]) == (s.sse, s.sse_kms_key_id):
        return *own, None
    from statectl.blobstore import open_blobstore
    from statectl.catalog.records import BlobCheckpointStore

    s3 = replace(session.s3_options, endpoint_url=to_s3_endpoint or s.s3_endpoint, **sse)
    target = open_blobstore(to_blobstore or s.blobstore, s3=s3, retries=s.retries, retry_time_s=s.retry_time,
                            # a dry run makes no dir: a new one reads as empty
                            create=("on-write" if dry_run else True) if env.flags.create else False)
    return target, BlobCheckpointStore(target, session.commit_log), target


def _copy_plan_text(plan: Any) -> str:
    how = "server-side" if plan.server_side else "through this host"
    lines = [f"would copy {b.blob_id} ({human_bytes(b.size)}) of {b.path}" for b in plan.blobs]
    lines.append(f"dry run: would copy snapshot {plan.source_snapshot_id} (checkpoint "
                 f"{plan.source_checkpoint_id}) into a new snapshot of {plan.store}/{plan.task} of job "
                 f"{plan.job} in {plan.target_blobstore}: {plan.files} files, {plan.blobs_copied} blobs, "
                 f"{human_bytes(plan.bytes_copied)} copied {how}")
    return "\n".join(lines)
