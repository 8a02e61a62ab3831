"""statectl adstore load | status | seal-checkpoint | versions | switch: flags parsed into the engine's
options (engine.adstore), one engine call, the result rendered."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional

import typer

from statectl.cli.base import exit_codes_epilog
from statectl.cli.common import Env, state_command, stop_on_signals
from statectl.errors import UsageError
from statectl.formats.serdes import KIND_ALIASES, KINDS
from statectl.local.datasets import FORMATS

SERDES = (*KINDS, *KIND_ALIASES)

if TYPE_CHECKING:
    from statectl.engine.adstore.dataset import DatasetLoadResult
    from statectl.engine.adstore.files import FileLoadPlan, FileLoadResult
    from statectl.engine.adstore.topic import LoadResult, TopicLoadPlan

app = typer.Typer(help="Read-only (adjunct) stores filled from a topic or a file dataset, as Samza's side-input stores.",
                  no_args_is_help=True, rich_markup_mode=None, context_settings={"max_content_width": 100})

WHERE = ("kafka", "zookeeper", "job", "job_id", "task", "store", "state_dir", "store_dir", "blobstore", "s3_endpoint")
DOCS = "See docs/adstore.md (man statectl-adstore-{}) for how it works."


def _opt(decl: str, help: str, **kw: Any) -> Any:
    """A typer option without a default shown (the help says what not giving it means)."""
    return typer.Option(decl, help=help, show_default=False, **kw)


TOPIC = Annotated[Optional[list[str]], _opt("--topic", "Fill from this topic (repeatable: one store fed by several).")]
FROM_FILE = Annotated[Optional[Path], _opt("--from-file", "Fill from this file or dir (Parquet, JSON lines, CSV).")]
FORMAT = Annotated[Optional[Literal[FORMATS]], _opt("--format", "The files' format (default: from their names).")]
BROADCAST = Annotated[bool, _opt("--broadcast", "Topic: one store holding every partition.")]
TASKS = Annotated[Optional[str], _opt("--tasks", "--broadcast: these tasks (a,b) each get the store.")]
PARTITIONS = Annotated[Optional[str], _opt("--partitions", "Topic: only these partitions (e.g. 0,2,4-7).")]
PARTITION_COUNT = Annotated[Optional[int], _opt("--partition-count", "Files: split the rows into this many stores.",
                                                min=1)]
KEY_FIELD = Annotated[Optional[str], _opt("--key-field", "The key: a field (a.b.c) of the JSON value, or a column.")]
VALUE_FIELD = Annotated[Optional[str], _opt("--value-field", "The value: a field of the JSON value, or a column.")]
VALUE_FIELDS = Annotated[Optional[str], _opt("--value-fields", "Files: the value is a JSON object of these columns.")]
EXTRACTOR = Annotated[Optional[str], _opt("--extractor", "Topic: module:callable turning a record into (key, value).")]
RENAMED = Annotated[Optional[list[str]], typer.Option(
    "--key-column", "--value-column", "--value-columns", hidden=True, show_default=False,
    callback=lambda ctx, param, value: _renamed(value))]
KEY_SERDE = Annotated[Optional[Literal[SERDES]], _opt("--key-serde", "Topic: the store's key serde (string, json, "
                                                      "long...).", metavar="SERDE")]
VALUE_SERDE = Annotated[Optional[Literal[SERDES]], _opt("--value-serde", "Topic: the store's value serde.",
                                                        metavar="SERDE")]
FOLLOW = Annotated[bool, _opt("--follow", "Topic: after the bootstrap, apply new records until stopped.")]
MAX_AGE = Annotated[Optional[str], _opt("--max-age", "Topic: rebuild a store older than this (e.g. 7d).")]
KEEP_VERSIONS = Annotated[int, typer.Option("--keep-versions", help="Versions kept per store.")]
ALLOW_EMPTY = Annotated[bool, _opt("--allow-empty", "Make a version without rows (refused by default).")]
SPARK = Annotated[bool, _opt("--spark", "Build on Spark (the bulk path).")]
MASTER = Annotated[str, _opt("--master", "Spark master (default local[*]; yarn, k8s://..., spark://...).")]
SPARK_CONF = Annotated[Optional[list[str]], _opt("--spark-conf", "KEY=VALUE for spark-submit (repeatable).")]
STAGE = Annotated[bool, _opt("--stage-through-blobstore", "--spark: hand the SST files over through --blobstore.")]
DATASET_VERSIONS = Annotated[bool, _opt("--dataset-versions", "Topic: versions of a dataset, each ended by a marker.")]
END_MARKER = Annotated[Optional[str], _opt("--end-marker", "--dataset-versions: a marker is a record with this key.")]
DRY_RUN = Annotated[bool, _opt("--dry-run", "Print the plan and write nothing.")]


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
    "Examples:\n\n  statectl adstore load --kafka broker:9092 --topic members-cdc --store members "
    "--state-dir /var/samza/state --key-field id\n\n"
    "  statectl adstore load --from-file /data/members.parquet --key-field id --store members "
    "--state-dir /var/samza/state --partition-count 8\n\n"
    + exit_codes_epilog(0, 1, (2, "usage, a dir adstore load did not make"), (3, "a marker was refused"), 10, 11,
                        13, 130)))
@state_command(*WHERE, "limit_rate")
def load(env: Env, topic: TOPIC = None, from_file: FROM_FILE = None, fmt: FORMAT = None, broadcast: BROADCAST = False,
         tasks: TASKS = None, partitions: PARTITIONS = None, partition_count: PARTITION_COUNT = None,
         key_field: KEY_FIELD = None, value_field: VALUE_FIELD = None, value_fields: VALUE_FIELDS = None,
         extractor: EXTRACTOR = None, renamed: RENAMED = None, key_serde: KEY_SERDE = None,
         value_serde: VALUE_SERDE = None, follow: FOLLOW = False, max_age: MAX_AGE = None,
         keep_versions: KEEP_VERSIONS = 2, allow_empty: ALLOW_EMPTY = False, spark: SPARK = False,
         master: MASTER = "local[*]", spark_conf: SPARK_CONF = None, stage_through_blobstore: STAGE = False,
         dataset_versions: DATASET_VERSIONS = False, end_marker: END_MARKER = None, dry_run: DRY_RUN = False) -> None:
    """Fill a read-only store from a topic (bootstrap, resume, --follow) or a file dataset.

    Writes only stores it made, or empty dirs: never a job's own store (exit 2). Modes, locks and exit
    codes: see docs/adstore.md (man statectl-adstore-load)."""
    from statectl.engine.adstore.load import LoadOptions
    from statectl.engine.adstore.load import load as run

    s = env.settings
    if env.flags.limit_rate is not None and from_file is None:
        raise UsageError("--limit-rate limits the reading of --from-file datasets, not of topics")
    opts = LoadOptions(
        s.store, state_dir=Path(s.state_dir) if s.state_dir else None,
        store_dir=Path(env.flags.store_dir) if env.flags.store_dir else None, task=s.task, bootstrap=s.kafka,
        topics=tuple(topic) if topic is not None else None, from_file=from_file, fmt=fmt, job=s.job,
        job_id=s.job_id, zookeeper=_zookeeper(env), security=env.session.kafka_security,
        timeout_s=s.timeout, broadcast=broadcast, tasks=_task_list(tasks), partitions=_partitions(partitions),
        partition_count=partition_count, key_field=key_field, value_field=value_field,
        value_fields=tuple(c.strip() for c in (value_fields or "").split(",") if c.strip()), extractor=extractor,
        key_serde=key_serde, value_serde=value_serde, follow=follow, max_age_s=_seconds(max_age, "--max-age"),
        keep_versions=keep_versions, allow_empty=allow_empty, dataset_versions=dataset_versions,
        spark=_spark(env, master, spark_conf, stage_through_blobstore) if spark else None, end_marker=end_marker,
        dry_run=dry_run, rate_limit=env.session.rate_limit if from_file is not None else None)
    stop, interrupted = stop_on_signals() if opts.runs_until_stopped else (None, [])
    r = run(opts, stop=stop, progress=env.progress)
    env.emit(r, _load_text(r))
    _exit(r, interrupted)


def _exit(r: Any, interrupted: list[int]) -> None:
    """130 for Ctrl-C, or any stop before the bootstrap reached the end (a script must not take it as
    loaded); 3 when --dataset-versions refused a marker (or, --dry-run, would)."""
    from statectl.engine.adstore.dataset import DatasetLoadResult

    if interrupted and (interrupted[0] == signal.SIGINT or not r.bootstrapped):
        raise typer.Exit(130)
    if isinstance(r, DatasetLoadResult) and any(st.refused for st in r.stores):
        raise typer.Exit(3)


def _spark(env: Env, master: str, conf: list[str] | None, through_blobstore: bool) -> Any:
    """--spark's options: the executors hand their SST files over through --blobstore when asked, or when
    the master is not local[...]."""
    from statectl.engine.adstore.common import SparkOptions

    s = env.settings
    through = through_blobstore or not master.startswith("local")
    return SparkOptions(master=master, conf=_conf(conf), staging=s.blobstore if through else "local",
                        s3=env.session.s3_options if through and s.blobstore.startswith("s3://") else None)


def _load_text(r: Any) -> str:
    """The text of what ``load`` returned: a load's result or, with --dry-run, its plan."""
    from statectl.engine.adstore.dataset import DatasetLoadResult
    from statectl.engine.adstore.files import FileLoadPlan, FileLoadResult
    from statectl.engine.adstore.topic import LoadResult

    if isinstance(r, DatasetLoadResult):
        return _dataset_text(r)
    if isinstance(r, LoadResult):
        return _topic_text(r)
    if isinstance(r, FileLoadResult):
        return _file_text(r)
    if isinstance(r, FileLoadPlan):
        return _file_plan_text(r)
    return _topic_plan_text(r)


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


def _topic_plan_text(tp: TopicLoadPlan) -> str:
    lines = [f"{st.store_dir}: would be {st.case}" + (f" ({st.reason})" if st.reason else "")
             + ": " + ", ".join(f"{k} from {st.start[k]} to {st.end[k]}" for k in st.start)
             for st in tp.stores]
    lines += [f"{c}: would get hard links of the first store's files (broadcast)" for c in tp.clones]
    lines.append(f"dry run: would load at most {tp.records} records of {', '.join(tp.topics)} into "
                 f"{len(tp.stores)} store(s), built with {tp.built_with}"
                 + ("; then keep applying new ones (--follow)" if tp.follow else ""))
    return "\n".join(lines)


def _file_plan_text(plan: FileLoadPlan) -> str:
    lines = [f"{v.store_dir}: would make version {v.version} current (now {v.previous}), "
             f"{'rows counted by the Spark job' if v.rows is None else f'{v.rows} rows'}"
             + (f"; would delete versions {', '.join(map(str, v.deleted_versions))}" if v.deleted_versions else "")
             for v in plan.stores]
    lines.append(f"dry run: would load {plan.source} ({plan.format}, {len(plan.files)} files, {plan.bytes} bytes"
                 + ("" if plan.rows is None else f", {plan.rows} rows") + f") as version {plan.version} of "
                 f"{len(plan.stores)} store(s), built with {plan.built_with}")
    lines += [f"note: {n}" for n in plan.notes]
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
    "Keep; delete-stale (the offsets file a day old); delete-mismatched (offsets not exactly the task's "
    "side-input partitions); delete-no-checkpoint (with --job: the container reads no checkpoint and clears the "
    "state dir); create (no dir yet). " + DOCS.format("status") + "\n\n"
    "Example:\n\n  statectl adstore status --state-dir /var/samza/state --store members --kafka broker:9092 "
    "--job page-views\n\n"
    + exit_codes_epilog(0, 2, (10, "no such store dir, store, coordinator stream or job model in ZooKeeper"),
                        (14, "the job's next start deletes some store"))))
@state_command("kafka", "zookeeper", "job", "job_id", "store", "state_dir", "store_dir")
def status_cmd(env: Env) -> None:
    """What Samza's next start does with each side-input store: keep, or delete (stale, mismatched, no checkpoint)."""
    from statectl.engine.adstore.status import StatusOptions, status

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
    "For a job that has not started (\"load, then deploy\"): without a checkpoint its containers delete the "
    "whole state dir at start, the stores loaded included. Writes an empty first checkpoint for each task "
    "without one; a task with one is never written to. Refused (exit 14, nothing written) when a checkpoint "
    "would not keep the stores. " + DOCS.format("seal-checkpoint") + "\n\n"
    "Example:\n\n  statectl adstore seal-checkpoint --kafka broker:9092 --job page-views "
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
    from statectl.engine.adstore.seal import SealOptions, seal_checkpoint

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
             "adstore switch checks it (every entry against its manifest); --quick makes only the cheap checks. "
             "Read-only. " + DOCS.format("versions") + "\n\n"
             "Example:\n\n  statectl adstore versions --state-dir /var/samza/state --store members "
             "--task 'Partition 3'\n\n" + exit_codes_epilog(0, 2, (10, "no versions")))
@state_command("task", "store", "state_dir", "store_dir")
def versions_cmd(env: Env, quick: Annotated[bool, typer.Option(
        "--quick", help="Only the cheap checks: the manifest, a RocksDB store with its files; not every entry "
                        "against the manifest.")] = False) -> None:
    """The sealed versions of a store loaded from files or --dataset-versions, the current one marked."""
    from statectl.engine.adstore.versions import versions

    r = versions(_store(env), quick=quick)
    lines = [f"  {'VERSION':>7}  {'CREATED':20}  {'KEYS':>15}  {'BUILT':5}  SOURCE (* CURRENT)"]
    lines += [f"{'*' if v.current else ' '} {v.version:>7}  {v.created or '-':20}  {v.keys if v.keys is not None else '-':>10} keys"
              f"  {v.built_with or '-':5}  {v.problem or v.source or ''}" for v in r.versions]
    env.emit(r, "\n".join(lines))


@app.command("switch", epilog="Without --version: back to the newest version older than the current one.\n\n"
             "The version is checked against its manifest first: every entry is read and their count, key range "
             "and checksum compared (one read of the whole store, about a million entries a second); --quick "
             "only checks that it is a RocksDB store with its files that opens. A damaged version is not made "
             "current. " + DOCS.format("switch") + "\n\n"
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
    from statectl.engine.adstore.versions import plan_switch, switch_version

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
