"""statectl adstore load | status | seal-checkpoint | versions | switch"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, Optional

import typer

from statectl.cli.base import exit_codes_epilog
from statectl.cli.common import Env, state_command, stop_on_signals
from statectl.errors import UsageError
from statectl.formats.serdes import KIND_ALIASES, KINDS
from statectl.local.datasets import FORMATS

SERDES = (*KINDS, *KIND_ALIASES)

if TYPE_CHECKING:
    from statectl.engine.adstore_files import FileLoadResult
    from statectl.engine.adstore_topic import LoadResult
    from statectl.engine.adstore_dataset import DatasetLoadResult
    from statectl.formats.adstore import KeyValueSpec

app = typer.Typer(help="Read-only (adjunct) stores filled from a topic or a file dataset, as Samza's side-input stores.",
                  no_args_is_help=True, rich_markup_mode=None)

WHERE = ("kafka", "zookeeper", "job", "job_id", "task", "store", "state_dir", "store_dir", "blobstore", "s3_endpoint")


def _seconds(value: str | None, flag: str) -> float | None:
    from statectl.config import parse_seconds

    if value is None:
        return None
    try:
        return parse_seconds(value)
    except ValueError as e:
        raise UsageError(f"{flag} {value!r}: {e}") from None


def _partitions(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise UsageError(f"--partitions {text!r}: expected numbers and ranges, e.g. 0,2,4-7")
        out += list(range(int(lo), int(hi) + 1)) if sep else [int(lo)]
    return tuple(out)


def _renamed(value: list[str] | None) -> None:
    """The file flags of old (--key-column, --value-column, --value-columns): one vocabulary now names a topic's
    fields and a file's columns; a script still passing them gets the new name, not a silent change."""
    if value:
        raise UsageError("--key-column, --value-column and --value-columns are now --key-field, --value-field and "
                         "--value-fields (one vocabulary for topics and files)")


def _conf(values: list[str] | None) -> dict[str, str]:
    out = {}
    for v in values or []:
        k, sep, val = v.partition("=")
        if not sep or not k:
            raise UsageError(f"--spark-conf {v!r}: expected KEY=VALUE")
        out[k] = val
    return out


@app.command("load", epilog=(
    "From a topic (--topic): one store per task, partition k -> 'Partition k' (or --broadcast: one store holding "
    "every partition). Each store keeps its offsets in SIDE-INPUT-OFFSETS, as Samza keeps side-input offsets: a "
    "load resumes where it stopped. A store found but not valid (older than --max-age, offsets off the topic, "
    "damaged files) is rebuilt in a staged dir and swapped in. Bootstraps to the end offsets taken at start, then "
    "exits; --follow keeps applying new records until SIGTERM (exit 0) or Ctrl-C (exit 130). Stopped before the "
    "bootstrap reached the end, it exits 130 (the next load resumes).\n\n"
    "A topic load only rebuilds a store it made (one holding its SIDE-INPUT-OFFSETS) or an empty dir: a job's own "
    "store, a dir of other files or a versioned adstore is refused (exit 2) and left as it is.\n\n"
    "From files (--from-file): builds a new version beside the current one, seals it with a manifest, and switches "
    "the store dir (a link) to it atomically; --keep-versions N keeps the N newest. A dataset without rows is "
    "refused (exit 1) unless --allow-empty; so is a file that changed while it was read.\n\n"
    "One adstore load or switch per store at a time (a lock file <store>.adstore.lock beside the store dir); "
    "another one exits 11.\n\n"
    "--spark: the bulk path: a Spark job (spark-submit, --master, local[*] by default) writes sorted SST files that "
    "are ingested into a new store.\n\n"
    "--dataset-versions (with --topic): the topic carries versions of a bounded dataset, each ended by an "
    "end-of-dataset marker: a record with the header statectl-end-of-dataset (or, with --end-marker KEY, a record with "
    "that key) whose value is the dataset version, a decimal integer that grows along the topic. The records of the "
    "next version are built into a new version of the store (as --from-file builds one), sealed with a manifest at "
    "its marker (topic, partitions, marker offsets) and switched to; adstore versions / switch and --keep-versions "
    "work as for files. A partitioned store is sealed when its partition saw the marker, a --broadcast store when "
    "every partition did. A load resumes after the last marker handled: a version killed half built is built again "
    "from its start, a sealed one never. A marker whose value is not a dataset version, that is not above the last "
    "version sealed, or that ends a version without records (unless --allow-empty) is refused: its version is not "
    "sealed, the current one stays, the load goes on and exits 3. --follow seals each new version as its marker "
    "comes; it holds <store>.adstore-dataset.lock (a second loader exits 11) and the store's lock only to change "
    "its versions, so adstore switch (a rollback) works meanwhile.\n\n"
    "Examples:\n\n  statectl adstore load --kafka broker:9092 --topic members-cdc --store members --state-dir /var/samza/state "
    "--key-field id\n\n  statectl adstore load --from-file /data/members.parquet --key-field id --store members "
    "--state-dir /var/samza/state --partition-count 8\n\n"
    "  statectl adstore load --from-file /data/members.parquet --key-field id --store members "
    "--state-dir /var/samza/state --partition-count 8 --dry-run\n\n"
    + exit_codes_epilog(0, (1, "a record or row that cannot be extracted, an empty dataset, a file changed while "
                               "read, a full disk, brokers unreachable, a Spark job that failed"),
                        (2, "usage, or a target dir adstore load did not make"),
                        (3, "--dataset-versions: an end-of-dataset marker was refused"),
                        (10, "no such topic, partition or dataset"),
                        (11, "a process holds the store, or another adstore load or switch runs on it"),
                        (13, "pyspark, Java or pyarrow missing"), 130)))
@state_command(*WHERE)
def load(
    env: Env,
    topic: Annotated[Optional[list[str]], typer.Option(
        "--topic", help="Fill from this topic (repeatable: one store fed by several streams, partition k of each "
                        "in task k's store).", show_default=False)] = None,
    from_file: Annotated[Optional[Path], typer.Option("--from-file", help="Fill from this file or dir (Parquet, JSON "
                                                      "lines, CSV) as a new version.", show_default=False)] = None,
    fmt: Annotated[Optional[Literal[FORMATS]], typer.Option(
        "--format", help="The files' format (default: from the file names).", show_default=False)] = None,
    broadcast: Annotated[bool, typer.Option("--broadcast", help="One store holding every partition (the store dir "
                                            "of --task, or --store-dir).")] = False,
    tasks: Annotated[Optional[str], typer.Option(
        "--tasks", help="With --broadcast: every one of these tasks (comma-separated) gets the store, as Samza keeps "
                        "a broadcast side input, one store per task; the first is loaded, the others hard-link its "
                        "files (with --job: default every task of the job).", show_default=False)] = None,
    partitions: Annotated[Optional[str], typer.Option(
        "--partitions", help="--topic: only these partitions (e.g. 0,2,4-7).", show_default=False)] = None,
    partition_count: Annotated[Optional[int], typer.Option(
        "--partition-count", help="--from-file: split the rows into this many stores, task 'Partition k' getting "
                                  "the keys Kafka's default partitioner sends to partition k (default: one store).",
        show_default=False, min=1)] = None,
    key_field: Annotated[Optional[str], typer.Option(
        "--key-field", help="The key: this field (a.b.c) of the record's JSON value (--topic; default: the record "
                            "key), or this column (--from-file; required).", show_default=False)] = None,
    value_field: Annotated[Optional[str], typer.Option(
        "--value-field", help="The value: this field of the record's JSON value (--topic; default: the whole "
                              "value), or this column (--from-file; default: a JSON object of the other columns).",
        show_default=False)] = None,
    value_fields: Annotated[Optional[str], typer.Option(
        "--value-fields", help="--from-file: the value is a JSON object of these columns (a,b,c).",
        show_default=False)] = None,
    extractor: Annotated[Optional[str], typer.Option("--extractor", help="--topic: module:callable turning a record "
                                                     "into (key, value), or None to skip it.", show_default=False)] = None,
    renamed: Annotated[Optional[list[str]], typer.Option(
        "--key-column", "--value-column", "--value-columns", hidden=True, show_default=False,
        callback=lambda ctx, param, value: _renamed(value))] = None,
    key_serde: Annotated[Optional[Literal[SERDES]], typer.Option(
        "--key-serde", help="Topic: the store's key serde: the record key as Samza's serde reads and writes it "
                            "(default: the job's stores.<store>.key.serde with --job, else the bytes as they are).",
        show_default=False)] = None,
    value_serde: Annotated[Optional[Literal[SERDES]], typer.Option(
        "--value-serde", help="Topic: the store's value serde (as --key-serde; the job's stores.<store>.msg.serde).",
        show_default=False)] = None,
    follow: Annotated[bool, typer.Option("--follow", help="Topic: after the bootstrap, keep applying new records "
                                         "until stopped.")] = False,
    max_age: Annotated[Optional[str], typer.Option("--max-age", help="Topic: rebuild a store whose newest file is "
                                                   "older than this (e.g. 7d).", show_default=False)] = None,
    keep_versions: Annotated[int, typer.Option("--keep-versions", help="Files and --dataset-versions: versions kept "
                                               "per store, the current one included.")] = 2,
    allow_empty: Annotated[bool, typer.Option("--allow-empty", help="Files: make a version of a dataset without rows "
                                              "(refused by default: exit 1); --dataset-versions: seal a version "
                                              "without records (its marker is refused by default).")] = False,
    spark: Annotated[bool, typer.Option("--spark", help="Build on Spark (the bulk path).")] = False,
    master: Annotated[str, typer.Option("--master", help="Spark master: local[*], yarn, k8s://..., "
                                        "spark://...")] = "local[*]",
    spark_conf: Annotated[Optional[list[str]], typer.Option("--spark-conf", help="KEY=VALUE for spark-submit "
                                                            "(repeatable).", show_default=False)] = None,
    stage_through_blobstore: Annotated[bool, typer.Option(
        "--stage-through-blobstore", help="--spark: the executors hand their SST files over through --blobstore "
                                          "(the default unless the master is local[...]).")] = False,
    dataset_versions: Annotated[bool, typer.Option(
        "--dataset-versions", help="Topic: the topic carries versions of a bounded dataset, each ended by an "
                                   "end-of-dataset marker; each becomes a sealed version, switched to at its "
                                   "marker.")] = False,
    end_marker: Annotated[Optional[str], typer.Option(
        "--end-marker", help="--dataset-versions: a marker is a record with this key (default: a record with the "
                             "header statectl-end-of-dataset); its value names the dataset version.",
        show_default=False)] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan and write nothing: --from-file: the "
                                          "version each store gets, its rows (every row's key checked), the versions "
                                          "pruned; --topic: each store created, resumed or rebuilt (and why), and "
                                          "the offsets it reads; --dataset-versions: the versions it would seal "
                                          "and the markers it would refuse.")] = False,
) -> None:
    """Fill a read-only store from a topic (bootstrap, resume, --follow) or a file dataset (a new version)."""
    from statectl.formats.adstore import KeyValueSpec

    s = env.settings
    if topic is not None and from_file is not None:
        raise UsageError("adstore load needs --topic or --from-file (one of them)")
    if topic is None and from_file is None and not s.job:
        raise UsageError("adstore load needs --topic or --from-file (one of them)",
                         hint="or --job (with --kafka) to take the store's side inputs from the job's config")
    if not s.store:
        raise UsageError("adstore load needs --store")
    cols = tuple(c.strip() for c in value_fields.split(",") if c.strip()) if value_fields else ()
    # One vocabulary: --key-field/--value-field name a topic's JSON fields or a file's columns; what does not
    # fit the source is refused by the engine's spec check (adstore_common._check_spec).
    if from_file is None:
        if partition_count is not None:
            raise UsageError("--partition-count is for --from-file; a topic's stores follow its partitions")
        spec = KeyValueSpec(key_field, value_field, extractor, value_columns=cols)
    else:
        if partitions is not None:
            raise UsageError("--partitions selects a topic's partitions; --from-file splits its rows into stores "
                             "with --partition-count N")
        spec = KeyValueSpec(extractor=extractor, key_column=key_field, value_column=value_field, value_columns=cols)
    store_dir = Path(env.flags.store_dir) if env.flags.store_dir else None
    state_dir = Path(s.state_dir) if s.state_dir else None
    spark_opts = None
    if spark:
        from statectl.engine.adstore_common import SparkOptions

        through = stage_through_blobstore or not master.startswith("local")
        spark_opts = SparkOptions(master=master, conf=_conf(spark_conf),
                                  staging=s.blobstore if through else "local",
                                  s3=env.session.s3_options if through and s.blobstore.startswith("s3://") else None)
    if end_marker is not None and not dataset_versions:
        raise UsageError("--end-marker is for --dataset-versions")
    if dataset_versions:
        topics = list(topic or ())
        if len(topics) > 1 or s.job or tasks:
            raise UsageError("--dataset-versions reads one --topic (no --job, no --tasks)")
        _dataset_versions(env, topics[0] if topics else None, spec, store_dir, state_dir, broadcast=broadcast,
                          partitions=partitions, follow=follow, end_marker=end_marker, keep_versions=keep_versions,
                          allow_empty=allow_empty, other=bool(from_file or fmt or max_age or spark), dry_run=dry_run)
        return
    if from_file is None:
        if fmt or keep_versions != 2 or allow_empty:
            raise UsageError("--format, --keep-versions and --allow-empty are for --from-file (--keep-versions and "
                             "--allow-empty also for --topic --dataset-versions)")
        from statectl.engine.adstore_topic import TopicLoadOptions, load_topic

        if follow and spark:
            raise UsageError("--follow applies records one by one: it does not combine with --spark")
        topics = tuple(topic or ())
        opts = TopicLoadOptions(s.kafka, topics[0] if topics else "", s.store, state_dir, broadcast=broadcast,
                                task=s.task, store_dir=store_dir, partitions=_partitions(partitions), spec=spec,
                                follow=follow, max_age_s=_seconds(max_age, "--max-age"),
                                security=env.session.kafka_security, timeout_s=s.timeout, topics=topics[1:],
                                key_serde=key_serde, value_serde=value_serde, job=s.job, job_id=s.job_id,
                                tasks=_task_list(tasks), zookeeper=_zookeeper(env))
        if dry_run:
            from statectl.engine.adstore_topic import plan_topic_load

            tp = plan_topic_load(opts, progress=env.progress, spark=spark_opts)
            lines = [f"{st.store_dir}: would be {st.case}" + (f" ({st.reason})" if st.reason else "")
                     + ": " + ", ".join(f"{k} from {st.start[k]} to {st.end[k]}" for k in st.start)
                     for st in tp.stores]
            lines += [f"{c}: would get hard links of the first store's files (broadcast)" for c in tp.clones]
            lines.append(f"dry run: would load at most {tp.records} records of {', '.join(tp.topics)} into "
                         f"{len(tp.stores)} store(s), built with {tp.built_with}"
                         + ("; then keep applying new ones (--follow)" if tp.follow else ""))
            env.emit(tp, "\n".join(lines))
            return
        stop, interrupted = stop_on_signals()
        r = load_topic(opts, stop=stop, progress=env.progress, spark=spark_opts)
        env.emit(r, _topic_text(r))
        # Ctrl-C, or any stop before the bootstrap reached the end: 130 (a script must not take it as loaded).
        if interrupted and (interrupted[0] == signal.SIGINT or not r.bootstrapped):
            raise typer.Exit(130)
        return
    if follow or max_age or key_serde or value_serde or tasks:
        raise UsageError("--follow, --max-age, --key-serde, --value-serde and --tasks are for --topic")
    if broadcast:
        raise UsageError("--broadcast is for --topic: a file dataset builds one store unless --partition-count N")
    from statectl.engine.adstore_files import FileLoadOptions, load_file

    fopts = FileLoadOptions(from_file, s.store, state_dir, fmt=fmt, task=s.task, store_dir=store_dir,
                            partitions=partition_count,
                            spec=spec, keep_versions=keep_versions, allow_empty=allow_empty)
    if dry_run:
        from statectl.engine.adstore_files import plan_file_load

        plan = plan_file_load(fopts, spark=spark_opts)
        lines = [f"{v.store_dir}: would make version {v.version} current (now {v.previous}), "
                 f"{'rows counted by the Spark job' if v.rows is None else f'{v.rows} rows'}"
                 + (f"; would delete versions {', '.join(map(str, v.deleted_versions))}" if v.deleted_versions else "")
                 for v in plan.stores]
        lines.append(f"dry run: would load {plan.source} ({plan.format}, {len(plan.files)} files, {plan.bytes} bytes"
                     + ("" if plan.rows is None else f", {plan.rows} rows") + f") as version {plan.version} of "
                     f"{len(plan.stores)} store(s), built with {plan.built_with}")
        lines += [f"note: {n}" for n in plan.notes]
        env.emit(plan, "\n".join(lines))
        return
    fr = load_file(fopts, progress=env.progress, spark=spark_opts)
    env.emit(fr, _file_text(fr))


def _dataset_versions(env: Env, topic: str | None, spec: KeyValueSpec, store_dir: Path | None, state_dir: Path | None, *,
                      broadcast: bool, partitions: str | None, follow: bool, end_marker: str | None,
                      keep_versions: int, allow_empty: bool, other: bool, dry_run: bool) -> None:
    """adstore load --topic --dataset-versions: exit 3 when a marker was (or, --dry-run, would be) refused (see
    adstore_dataset)."""
    from statectl.engine.adstore_dataset import DatasetLoadOptions, load_dataset_versions

    s = env.settings
    if topic is None or other:
        raise UsageError("--dataset-versions reads a --topic; --from-file, --format, --max-age and --spark do not "
                         "combine with it")
    opts = DatasetLoadOptions(s.kafka, topic, s.store, state_dir, broadcast=broadcast, task=s.task,
                              store_dir=store_dir, partitions=_partitions(partitions), spec=spec,
                              end_marker=end_marker, keep_versions=keep_versions, allow_empty=allow_empty,
                              follow=follow, security=env.session.kafka_security, timeout_s=s.timeout,
                              dry_run=dry_run)
    stop, interrupted = stop_on_signals()
    r = load_dataset_versions(opts, stop=stop, progress=env.progress)
    env.emit(r, _dataset_text(r))
    if interrupted and (interrupted[0] == signal.SIGINT or not r.bootstrapped):
        raise typer.Exit(130)
    if any(st.refused for st in r.stores):
        raise typer.Exit(3)


def _dataset_text(r: DatasetLoadResult) -> str:
    would = "would be " if r.dry_run else ""
    lines = []
    for st in r.stores:
        for v in st.sealed:
            lines.append(f"{st.store_dir}: dataset version {v.dataset_version} {would}sealed as version {v.version} "
                         + (f"({v.records} records) and made current" if r.dry_run else
                            f"({v.records} records, {v.keys} keys, checksum {v.checksum})")
                         + (f"; {'would delete' if r.dry_run else 'deleted'} versions "
                            f"{', '.join(map(str, v.deleted_versions))}" if v.deleted_versions else ""))
        lines.append(f"{st.store_dir}: current version {st.version if st.version is not None else '-'}"
                     + (f" (dataset version {st.dataset_version})" if st.dataset_version is not None else "")
                     + (f"; {st.pending_records} records of an unfinished version {'would not be' if r.dry_run else 'not'}"
                        " kept" if st.pending_records else ""))
    if r.dry_run:
        lines.append(f"dry run: would seal {r.versions_sealed} version{'s' if r.versions_sealed != 1 else ''} from "
                     f"{r.records} records of {r.topic}" + (f"; would skip {r.skipped}" if r.skipped else "")
                     + (f"; {len(r.refused)} marker(s) would be refused" if r.refused else ""))
    else:
        lines.append(f"sealed {r.versions_sealed} version{'s' if r.versions_sealed != 1 else ''} from {r.records} "
                     f"records of {r.topic} in {r.duration_s:.1f}s" + (f"; skipped {r.skipped}" if r.skipped else ""))
    return "\n".join(lines)


def _topic_text(r: LoadResult) -> str:
    lines = []
    for st in r.stores:
        why = f" ({st.reason})" if st.reason else ""
        lines.append(f"{st.store_dir}: {st.case}{why}; {st.records} records; offsets "
                     + ", ".join(f"{k}={v}" for k, v in st.offsets.items()))
    lines.append(f"loaded {r.records} records ({r.bytes} bytes) from {', '.join(r.topics) or r.topic} in "
                 f"{r.duration_s:.1f}s"
                 + (f"; skipped {r.skipped}" if r.skipped else ""))
    return "\n".join(lines)


def _file_text(r: FileLoadResult) -> str:
    lines = [f"{st.store_dir}: version {st.version} ({st.keys} keys, checksum {st.checksum}) is current"
             + (f", was {st.previous}" if st.previous is not None else "")
             + (f"; deleted versions {', '.join(map(str, st.deleted_versions))}" if st.deleted_versions else "")
             for st in r.stores]
    lines.append(f"loaded {r.rows} rows from {r.source} with {r.built_with} in {r.duration_s:.1f}s")
    return "\n".join(lines)


def _store(env: Env) -> Path:
    from statectl.local.layout import store_dir

    if env.flags.store_dir:
        return Path(env.flags.store_dir)
    s = env.settings
    if not (s.state_dir and s.store):
        raise UsageError("name the store: --state-dir, --store and --task, or --store-dir")
    return store_dir(Path(s.state_dir), s.store, s.task)


@app.command("status", epilog=(
    "Per store dir (--store-dir, or every task dir of --store under --state-dir): its offsets as Samza reads them "
    "(OFFSET-v2, else SIDE-INPUT-OFFSETS), the age of the file Samza judges staleness by (CHECKPOINT-V2, else "
    "OFFSET-v2, else SIDE-INPUT-OFFSETS), and what the job's next start does with it "
    "(TaskSideInputStorageManager): keep; delete-stale (that file at least one day old, Samza's fixed "
    "STORE_DELETE_RETENTION_MS); delete-mismatched (no offsets, or not exactly the task's side-input SSPs); "
    "create (no dir yet). The task's side-input SSPs come from the job's config and job model with --kafka and "
    "--job (the job's tasks, GroupByPartition; with --zookeeper, the SSPs a standalone job's model in ZooKeeper "
    "gives each task), else from what adstore load recorded in the store.\n\n"
    "With --job, the job's checkpoint topic too: a container that reads no checkpoint for any of its active tasks "
    "(of the versions task.checkpoint.read.versions names, 1 by default) deletes the whole state dir at start "
    "(ContainerStorageManager), so does a container of standby tasks only, one without task.checkpoint.factory, "
    "and every container of a new run of a BATCH application (a new app.run.id: a new, empty checkpoint topic): "
    "delete-no-checkpoint for the stores of its tasks, and of the tasks of a container that last ran on the same "
    "host. The containers are the job model's (--zookeeper: a standalone job's processors). adstore "
    "seal-checkpoint gives a job that has not started its first checkpoints.\n\n"
    "Example:\n\n  statectl adstore status --state-dir /var/samza/state --store members --kafka broker:9092 "
    "--job page-views\n\n"
    + exit_codes_epilog(0, 2, (10, "no such store dir, store, coordinator stream or job model in ZooKeeper"),
                        (14, "the job's next start deletes some store"))))
@state_command("kafka", "zookeeper", "job", "job_id", "store", "state_dir", "store_dir")
def status_cmd(env: Env) -> None:
    """What Samza's next start does with each side-input store: keep, or delete (stale, mismatched, no checkpoint)."""
    from statectl.engine.adstore_status import StatusOptions, status

    s = env.settings
    r = status(StatusOptions(store=s.store, state_dir=Path(s.state_dir) if s.state_dir else None,
                             store_dir=Path(env.flags.store_dir) if env.flags.store_dir else None,
                             bootstrap=s.kafka if s.job else None, job=s.job, job_id=s.job_id,
                             security=env.session.kafka_security, timeout_s=s.timeout, zookeeper=_zookeeper(env)))
    lines = []
    for st in r.stores:
        age = f"{st.age_s / 3600:.1f}h" if st.age_s is not None else "-"
        lines.append(f"{st.store_dir}: {st.action} ({st.reason}); age {age}; offsets "
                     + (", ".join(f"{k}={v}" for k, v in st.offsets.items()) or "none"))
    lines += [f"note: {n}" for n in r.notes]
    env.emit(r, "\n".join(lines))
    if r.deleted:
        from statectl.errors import EXIT_DISCARDED

        raise typer.Exit(EXIT_DISCARDED)


@app.command("seal-checkpoint", epilog=(
    "For a job that has not started yet (\"load, then deploy\"): a container that reads no checkpoint for any of "
    "its active tasks deletes the whole state dir at start (Samza's ContainerStorageManager), the stores loaded "
    "for it included. This writes an empty first checkpoint (a v1 and a v2 record: no input offsets, no state "
    "markers; the job's inputs start where they start without one) to the job's checkpoint topic for each of its "
    "tasks that has no record there; a task with one is never written to. Then the job's first start keeps "
    "each side-input store that is not stale (deploy within a day of the load: Samza's fixed "
    "STORE_DELETE_RETENTION_MS) and holds exactly its task's side-input partitions (adstore status).\n\n"
    "The tasks: the job's on its coordinator stream; for a job without one, --tasks (every task of the job: a "
    "container whose tasks all lack a checkpoint still deletes the state dir), else the store dirs' "
    "Partition_N. The checkpoint keys name the job's SSP grouper factory (its config's "
    "job.systemstreampartition.grouper.factory, else --grouper-factory, else the one the job's keys in the topic "
    "name, else GroupByPartitionFactory). Refused "
    "(exit 14, nothing written) when a checkpoint would not keep the stores: the job has no "
    "task.checkpoint.factory or keeps checkpoints outside Kafka, it is a BATCH application with an app.run.id "
    "(each run gets a new one and reads a new checkpoint topic named after it), or a store is stale or "
    "mismatched.\n\n"
    "Example:\n\n  statectl adstore load --kafka broker:9092 --topic members-cdc --store members "
    "--state-dir /var/samza/state\n\n  statectl adstore seal-checkpoint --kafka broker:9092 --job page-views "
    "--store members --state-dir /var/samza/state --tasks 'Partition 0,Partition 1,Partition 2,Partition 3'\n\n"
    + exit_codes_epilog(0, (1, "brokers unreachable, a write that failed"),
                        (2, "usage, a store dir whose task cannot be told, a grouper other than the job's"),
                        (10, "no such store under the state dir"),
                        (14, "refused: the job's start would delete the stores anyway"))))
@state_command("kafka", "job", "job_id", "store", "state_dir")
def seal_cmd(env: Env, tasks: Annotated[Optional[str], typer.Option(
        "--tasks", help="For a job whose coordinator stream names no tasks: all its tasks (comma-separated; "
                        "default: the store dirs' Partition_N).", show_default=False)] = None,
        grouper_factory: Annotated[Optional[str], typer.Option(
            "--grouper-factory", help="For a job whose config is not on a coordinator stream: its "
                                      "job.systemstreampartition.grouper.factory.", show_default=False)] = None,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Say which tasks would get a checkpoint; write "
                                              "nothing.")] = False) -> None:
    """Give the tasks of a job that has not started a first checkpoint, so its start keeps the stores loaded."""
    from statectl.engine.adstore_seal import SealOptions, seal_checkpoint

    s = env.settings
    if not s.job:
        raise UsageError("adstore seal-checkpoint needs --job")
    r = seal_checkpoint(SealOptions(s.kafka, s.job, s.store, Path(s.state_dir) if s.state_dir else None,
                                    job_id=s.job_id, tasks=_task_list(tasks), grouper_factory=grouper_factory,
                                    dry_run=dry_run, security=env.session.kafka_security, timeout_s=s.timeout))
    would = "would give" if r.dry_run else "gave"
    lines = [f"{st.store_dir}: {st.action} ({st.reason})" for st in r.stores]
    lines += [f"note: {n}" for n in r.notes]
    lines.append(f"{'dry run: ' if r.dry_run else ''}{would} {len(r.sealed)} task(s) of job {r.job}-{r.job_id} a first "
                 f"checkpoint in {r.topic}" + (f" ({r.checkpoint_id})" if r.checkpoint_id else "")
                 + (f": {', '.join(r.sealed)}" if r.sealed else "")
                 + (f"; {len(r.skipped)} had one already" if r.skipped else ""))
    env.emit(r, "\n".join(lines))


@app.command("versions", epilog="A version's problem (a damaged manifest, not a RocksDB store, its SST files gone, "
             "entries that do not match its manifest) shows instead of its source. Each version is checked as "
             "adstore switch checks it: every entry read and their count, key range and checksum compared with "
             "its manifest (one read of every version, about a million entries a second); --quick makes only "
             "the cheap checks.\n\n"
             "Example:\n\n  statectl adstore versions --state-dir /var/samza/state --store members "
             "--task 'Partition 3'\n\n" + exit_codes_epilog(0, 2, (10, "no versions")))
@state_command("task", "store", "state_dir", "store_dir")
def versions_cmd(env: Env, quick: Annotated[bool, typer.Option(
        "--quick", help="Only the cheap checks: the manifest, a RocksDB store with its files; not every entry "
                        "against the manifest.")] = False) -> None:
    """The sealed versions of a store loaded from files or --dataset-versions, the current one marked."""
    from statectl.engine.adstore_versions import versions

    r = versions(_store(env), quick=quick)
    lines = [f"{'*' if v.current else ' '} {v.version:>4}  {v.created or '-':20}  {v.keys if v.keys is not None else '-':>10} keys"
             f"  {v.built_with or '-':5}  {v.problem or v.source or ''}" for v in r.versions]
    env.emit(r, "\n".join(lines))


@app.command("switch", epilog="Without --version: back to the newest version older than the current one.\n\n"
             "The version is checked against its manifest first: every entry is read and their count, key range "
             "and checksum compared (one read of the whole store, about a million entries a second); --quick "
             "only checks that it is a RocksDB store with its files that opens. A damaged version is not made "
             "current.\n\n"
             "Examples:\n\n  statectl adstore switch --state-dir /var/samza/state --store members --version 3\n\n"
             "  statectl adstore switch --state-dir /var/samza/state --store members --dry-run\n\n"
             + exit_codes_epilog(0, (1, "the version is damaged"), 2, (10, "no such sealed version"),
                                 (11, "an adstore load or switch runs on the store")))
@state_command("task", "store", "state_dir", "store_dir")
def switch_cmd(env: Env, version: Annotated[Optional[int], typer.Option(
        "--version", help="The version to make current (default: roll back one).", show_default=False)] = None,
        quick: Annotated[bool, typer.Option("--quick", help="Check only that the version is a store that opens, "
                                            "not every entry against its manifest.")] = False,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Make the checks and print which version would "
                                              "become current; change nothing.")] = False) -> None:
    """Point a store at another sealed version atomically (a rollback, or forward again)."""
    from statectl.engine.adstore_versions import plan_switch, switch_version

    if dry_run:
        p = plan_switch(_store(env), version, quick=quick)
        env.emit(p, f"dry run: {p.store_dir}: would make version {p.version} current (now {p.previous}); "
                    f"version {p.version} passed the {p.check} check")
        return
    r = switch_version(_store(env), version, quick=quick)
    env.emit(r, f"{r.store_dir}: version {r.version} is current (was {r.previous})")


def _zookeeper(env: Env) -> str | None:
    """--zookeeper for a load or status of --job; one from the environment or a profile is left out without
    --job (it names a job's ZooKeeper), one given as a flag is not (the engine refuses it)."""
    return env.settings.zookeeper if env.settings.job else env.flags.zookeeper


def _task_list(text: str | None) -> tuple[str, ...]:
    """--tasks: the comma-separated task names (blank ones refused)."""
    if text is None:
        return ()
    names = tuple(t.strip() for t in text.split(","))
    if not all(names):
        raise UsageError(f"--tasks {text!r} names an empty task", hint="pass --tasks 'Partition 0,Partition 1'")
    return names
