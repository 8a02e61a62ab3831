"""adstore status: what a Samza job's next start does with each side-input store dir.

TaskSideInputStorageManager.initializeStoreDirectories deletes a side-input store dir unless it is valid
(isValidSideInputStore): not stale and with a valid offset file.

- Stale (StorageManagerUtil.isStaleStore with STORE_DELETE_RETENTION_MS, one day, fixed: not the changelog
  retention config): ``now - mtime >= 1 day`` where mtime is that of ``CHECKPOINT-V2`` if the dir has one,
  else of ``OFFSET-v2``, else of ``SIDE-INPUT-OFFSETS``, else 0 (so a dir with none of them is stale).
- Valid offset file (isOffsetFileValid / readOffsetFile): the offsets of ``OFFSET-v2`` if it exists, else of
  ``SIDE-INPUT-OFFSETS``; missing (neither file), empty (a damaged file reads as empty: readWithChecksum
  fails or returns null and the map stays empty; a file that is not JSON reads as the single SSP's offset when
  the store has exactly one), or a keyset that is not exactly the task's side-input SSPs: mismatched.

The task's side-input SSPs come from the job (config and job model: formats.sideinputs) when given, else from
what the load that made the store recorded in it (SIDE_INPUTS_FILE; Samza ignores the file), else they are
unknown (then only an empty or missing offset file counts as mismatched).

Before any of that, the whole state dir can go (:func:`checkpoint_wipes`, with the job): side-input stores live
in the logged store base dir (ContainerStorageManagerUtil.getStoreDirPath), and a container that reads no
checkpoint for any of its active tasks deletes every entry of that dir (ContainerStorageManager.restoreStores
-> clearLoggedStores): a new job, a cleared checkpoint topic, no task.checkpoint.factory, a container of standby
tasks only, a new run of a BATCH application. Such a store is delete-no-checkpoint. The containers and their
tasks are the job model's: the coordinator stream's, or with ``zookeeper`` a standalone job's in ZooKeeper.
Read-only; takes no lock.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from statectl.errors import ConfigError, NotFoundError, UsageError
from statectl.formats.checkpoint import SSP
from statectl.formats.offsets import (
    CHECKPOINT_V2,
    OFFSET_V2,
    SIDE_INPUT_OFFSETS,
    OffsetFileError,
    parse_offsets,
    read_offset_file,
)
from statectl.local.layout import store_dir, task_of_dir

# TaskSideInputStorageManager.STORE_DELETE_RETENTION_MS = TimeUnit.DAYS.toMillis(1), not configurable
STORE_DELETE_RETENTION_MS = 24 * 3600 * 1000
KEEP, DELETE_STALE, DELETE_MISMATCHED, CREATE = "keep", "delete-stale", "delete-mismatched", "create"
DELETE_NO_CHECKPOINT = "delete-no-checkpoint"
CHECKPOINT_FACTORY = "task.checkpoint.factory"
KAFKA_CHECKPOINT_FACTORY = "org.apache.samza.checkpoint.kafka.KafkaCheckpointManagerFactory"
READ_VERSIONS = "task.checkpoint.read.versions"
SIDE_INPUTS_FILE = "STATECTL-SIDE-INPUTS"  # in a store a load made: JSON list of its side-input SSP keys
_CHECKPOINT_DIR = re.compile(r".+-\d+-\d+")  # <task dir>-<checkpointId>


@dataclass
class StoreStatus:
    """One store dir: ``offsets`` as Samza reads them (``offset_file`` names the file; None: neither
    exists), ``age_s`` of the file whose mtime decides staleness (``age_file``; None: no such file, Samza
    takes mtime 0), ``expected`` the task's side-input SSPs (``expected_from``: "job", "store" or None:
    unknown), and ``action``: keep, delete-stale, delete-mismatched, delete-no-checkpoint (the container clears
    the whole state dir), or create (no dir yet), with ``reason``."""

    store_dir: str
    task: str | None
    action: str
    reason: str
    offsets: dict[str, str | None] = field(default_factory=dict)
    offset_file: str | None = None
    age_file: str | None = None
    age_s: float | None = None
    expected: list[str] | None = None
    expected_from: str | None = None

    @property
    def deleted(self) -> bool:
        return self.action in (DELETE_STALE, DELETE_MISMATCHED, DELETE_NO_CHECKPOINT)


@dataclass
class StatusResult:
    """Every store looked at; ``deleted``: how many the job's next start deletes."""

    store: str | None
    retention_ms: int = STORE_DELETE_RETENTION_MS
    stores: list[StoreStatus] = field(default_factory=list)
    deleted: int = 0
    notes: list[str] = field(default_factory=list)


def recorded_side_inputs(path: Path) -> set[SSP] | None:
    """The side-input SSPs a load recorded in the store (None: no readable record)."""
    from statectl.formats.offsets import parse_ssp_key

    try:
        keys = json.loads((Path(path) / SIDE_INPUTS_FILE).read_text())
        return {parse_ssp_key(k) for k in keys}
    except (OSError, ValueError, TypeError):
        return None


def record_side_inputs(path: Path, ssps: set[SSP]) -> None:
    """Record the store's side-input SSPs in it (atomically; unchanged when already so). Raises OSError."""
    if recorded_side_inputs(path) == set(ssps):
        return
    from statectl.fsutil import SYNC_NONE, write_atomic

    write_atomic(Path(path) / SIDE_INPUTS_FILE, json.dumps(sorted(s.key() for s in ssps)) + "\n", sync=SYNC_NONE)


def _samza_offsets(path: Path, expected: set[SSP] | None) -> tuple[str | None, dict[SSP, str | None] | None, str]:
    """(file read, offsets, what went wrong) as StorageManagerUtil.readOffsetFile(dir, ssps, true) reads."""
    name = OFFSET_V2 if (path / OFFSET_V2).exists() else SIDE_INPUT_OFFSETS if (path / SIDE_INPUT_OFFSETS).exists() \
        else None
    if name is None:
        return None, None, ""
    try:
        text = read_offset_file(path / name)
    except (OSError, OffsetFileError) as e:
        return name, {}, f"its {name} is unreadable ({e})"
    try:
        return name, parse_offsets(text), ""
    except OffsetFileError as e:
        if expected is not None and len(expected) == 1:  # read as the one SSP's bare offset
            return name, {next(iter(expected)): text}, ""
        return name, {}, f"its {name} is not an offsets map ({e})"


def predict(path: Path, expected: set[SSP] | None, *, task: str | None = None, expected_from: str | None = None,
            now_s: float | None = None) -> StoreStatus:
    """What Samza's next start does with the side-input store dir ``path`` (see the module doc).
    ``expected``: the task's side-input SSPs (None: unknown). Never raises for what it finds in the dir."""
    path = Path(path)
    now_ms = int((time.time() if now_s is None else now_s) * 1000)
    keys = sorted(s.key() for s in expected) if expected is not None else None
    st = StoreStatus(str(path), task, KEEP, "", expected=keys, expected_from=expected_from if keys is not None else None)
    if not path.exists():
        st.action, st.reason = CREATE, "no store dir: Samza creates it and reads its side inputs from the oldest offsets"
        return st
    age_file = next((n for n in (CHECKPOINT_V2, OFFSET_V2, SIDE_INPUT_OFFSETS) if (path / n).exists()), None)
    mtime_ms = int((path / age_file).stat().st_mtime * 1000) if age_file else 0
    st.age_file = age_file
    st.age_s = round((now_ms - mtime_ms) / 1000, 3) if age_file else None
    name, offsets, problem = _samza_offsets(path, expected)
    st.offset_file = name
    st.offsets = {s.key(): v for s, v in (offsets or {}).items()}
    if now_ms - mtime_ms >= STORE_DELETE_RETENTION_MS:
        st.action = DELETE_STALE
        st.reason = (f"its {age_file} is {(now_ms - mtime_ms) / 3600000:.1f}h old, at least the 24h of "
                     "TaskSideInputStorageManager's STORE_DELETE_RETENTION_MS" if age_file else
                     f"it has no {OFFSET_V2}, {SIDE_INPUT_OFFSETS} or {CHECKPOINT_V2} (Samza takes its age from 0)")
        if age_file == CHECKPOINT_V2:
            st.reason += f" (Samza takes the age from {CHECKPOINT_V2} when the dir has one)"
        return st
    st.action = DELETE_MISMATCHED
    if offsets is None:
        st.reason = f"it has no offset file ({OFFSET_V2} or {SIDE_INPUT_OFFSETS})"
    elif not offsets:
        st.reason = problem or f"its {name} holds no offsets"
    elif expected is not None and set(offsets) != expected:
        missing = sorted(s.key() for s in expected - set(offsets))
        extra = sorted(s.key() for s in set(offsets) - expected)
        parts = []
        if missing:
            parts.append(f"no offset for {', '.join(missing[:5])}" + (" (no record of it applied yet)" if
                                                                        expected_from == "store" else ""))
        if extra:
            parts.append(f"offsets of {', '.join(extra[:5])}, which are not the task's side inputs")
        st.reason = f"its {name} does not hold exactly the task's side-input SSPs: " + "; ".join(parts)
    else:
        st.action = KEEP
        st.reason = ("its offsets are the task's side-input SSPs and not stale" if expected is not None else
                     "not stale; its side-input SSPs are unknown (no record in the store: pass --kafka and --job to "
                     "check against the job)")
    return st


@dataclass(frozen=True)
class StatusOptions:
    """The store dirs: ``store_dir``, or every task dir of ``store`` under ``state_dir``. With ``bootstrap``
    and ``job``: the tasks and their side-input SSPs from the job's coordinator stream and the topics'
    partition counts, or with ``zookeeper`` from a standalone job's model in ZooKeeper."""

    store: str | None = None
    state_dir: Path | None = None
    store_dir: Path | None = None
    bootstrap: str | None = None
    job: str | None = None
    job_id: str = "1"
    security: Any = None
    timeout_s: float = 30.0
    zookeeper: str | None = None

    def validate(self) -> None:
        if self.store_dir is None and not (self.state_dir and self.store):
            raise UsageError("adstore status needs --store-dir, or --state-dir and --store")
        if self.job and not self.bootstrap:
            raise UsageError("--job needs --kafka (to read the job's coordinator stream)")
        if self.job and not self.store:
            raise UsageError("--job needs --store (the store's side inputs are in the job's config)")
        if self.zookeeper and not self.job:
            raise UsageError("--zookeeper needs --job (and --kafka): it holds the model of a standalone job")
        if self.store:
            from statectl.local.layout import check_name

            check_name("store", self.store)


def status(opts: StatusOptions, *, now_s: float | None = None) -> StatusResult:
    """Predict the next start of the job for each store dir (see the module doc). Raises UsageError for bad
    options; NotFoundError when ``store_dir`` or the store's dir under ``state_dir`` does not exist (without a
    job) or the job's coordinator stream does not exist; ConfigError (exit 2) for a job config statectl
    cannot read (formats.sideinputs). Read-only."""
    opts.validate()
    result = StatusResult(opts.store)
    job_ssps: dict[str, set[SSP]] | None = None
    wipes: dict[str, str] = {}
    if opts.job:
        model = read_job_model(opts.bootstrap or "", opts.job, opts.job_id, security=opts.security,
                               timeout_s=opts.timeout_s, zookeeper=opts.zookeeper)
        job_ssps = job_side_input_ssps(opts.bootstrap or "", opts.job, opts.job_id, opts.store or "",
                                       security=opts.security, timeout_s=opts.timeout_s, notes=result.notes,
                                       config=model.config, tasks=job_tasks(model), task_ssps=model.task_ssps)
        wipes = checkpoint_wipes(opts.bootstrap or "", opts.job, opts.job_id, model, security=opts.security,
                                 timeout_s=opts.timeout_s, notes=result.notes)
    else:
        result.notes.append("the job's checkpoints are not checked (pass --kafka and --job): a container that reads "
                            "no checkpoint for any of its active tasks deletes the whole state dir at start")
    dirs: list[tuple[Path, str | None]] = []
    if opts.store_dir is not None:
        path = Path(opts.store_dir).absolute()
        task = None
        if job_ssps is not None:
            task = task_of_dir(path.name, job_ssps)
        if not path.exists() and job_ssps is None:
            raise NotFoundError(f"no store dir {path}")
        dirs.append((path, task))
    elif job_ssps is not None:
        dirs = [(store_dir(Path(opts.state_dir), opts.store, t).absolute(), t) for t in sorted(job_ssps, key=_task_key)]
    else:
        base = Path(opts.state_dir) / str(opts.store)
        if not base.is_dir():
            raise NotFoundError(f"no store {opts.store} under {opts.state_dir} (no dir {base})")
        for p in sorted(base.iterdir(), key=lambda p: _task_key(p.name)):
            if p.is_dir() and not p.is_symlink() and not p.name.startswith(".") and not _CHECKPOINT_DIR.fullmatch(p.name):
                dirs.append((p.absolute(), None))
    for path, task in dirs:
        if job_ssps is not None and task is not None:
            st = predict(path, job_ssps[task], task=task, expected_from="job", now_s=now_s)
        else:
            if job_ssps is not None:
                result.notes.append(f"{path} is not the dir of a task of job {opts.job}-{opts.job_id}")
            recorded = recorded_side_inputs(path)
            st = predict(path, recorded, task=task, expected_from="store", now_s=now_s)
        if task in wipes and st.action != CREATE:
            st.action, st.reason = DELETE_NO_CHECKPOINT, wipes[task]
        result.stores.append(st)
    result.deleted = sum(1 for s in result.stores if s.deleted)
    return result


def _task_key(name: str) -> tuple[int, str]:
    """Sort key of a task or its dir name (``Partition N`` and ``Partition_N`` in N's order)."""
    m = re.fullmatch(r"Partition[ _](\d+)", name)
    return (int(m.group(1)), "") if m else (1 << 31, name)


def job_side_input_ssps(bootstrap: str, job: str, job_id: str, store: str, *, security: Any = None,
                        timeout_s: float = 30.0, notes: list[str] | None = None,
                        config: Mapping[str, str] | None = None, tasks: list[str] | None = None,
                        zookeeper: str | None = None,
                        task_ssps: Mapping[str, frozenset[SSP]] | None = None) -> dict[str, set[SSP]]:
    """Each active task's side-input SSPs of ``store`` from the job: its config and tasks (the job model on
    the coordinator stream: task -> container assignments, else the changelog partition mapping; with
    ``zookeeper``, a standalone job's model in ZooKeeper) and, for a model that does not list each task's SSPs,
    the side-input topics' partition counts on ``bootstrap`` (GroupByPartition). ``config``/``tasks``/
    ``task_ssps``: already read. Raises NotFoundError (no coordinator stream, no model in ZooKeeper, no tasks,
    a side-input topic that does not exist), ConfigError."""
    from statectl.formats.jobconfig import SystemStream
    from statectl.formats.sideinputs import model_side_input_ssps, side_inputs, side_inputs_key, task_side_input_ssps

    if config is None or tasks is None:
        model = read_job_model(bootstrap, job, job_id, security=security, timeout_s=timeout_s, zookeeper=zookeeper)
        config = model.config if config is None else config
        tasks = job_tasks(model) if tasks is None else tasks
        task_ssps = model.task_ssps if task_ssps is None else task_ssps
    streams = side_inputs(config, store)
    if not streams:
        raise NotFoundError(f"job {job}-{job_id} has no side inputs for store {store} (no {side_inputs_key(store)} "
                            f"or stores.{store}.adstore.input in its config)", hint="check --store and --job")
    if not tasks:
        raise NotFoundError(f"the job model of job {job}-{job_id} names no tasks",
                            hint="the job writes its task assignments when it first starts (a standalone job's "
                                 "model is in ZooKeeper: pass --zookeeper)")
    if task_ssps:
        return model_side_input_ssps(config, store, {t: task_ssps.get(t, frozenset()) for t in tasks})
    counts: dict[SystemStream, int] = {}
    from statectl.kafka.client import open_consumer, partition_count
    from statectl.kafka.systems import system_brokers

    for ss in streams:  # each on the brokers of its system (another cluster, when the config says so)
        where = system_brokers(config, ss.system, bootstrap, security)
        consumer = open_consumer(where.bootstrap, timeout_s=timeout_s, security=where.security)
        try:
            n = partition_count(consumer, ss.stream, where.bootstrap)
        finally:
            consumer.close()
        if n is None:
            raise NotFoundError(f"side input {ss} of store {store} does not exist on {where.bootstrap}")
        counts[ss] = n
    return task_side_input_ssps(config, store, tasks, counts)


def checkpoint_read_versions(config: Mapping[str, str]) -> list[int]:
    """TaskConfig.getCheckpointReadVersions: the checkpoint versions the job's start reads, in priority order
    (``task.checkpoint.read.versions``, default 1: v1 only). ConfigError (exit 2) naming the key for a value
    Samza cannot parse (Short.valueOf: its start fails)."""
    from statectl.formats.jobconfig import get_list

    values = get_list(config, READ_VERSIONS) or ["1"]
    try:
        return [int(v.strip()) for v in values]
    except ValueError:
        raise ConfigError(f"{READ_VERSIONS}={config[READ_VERSIONS]}: not a list of checkpoint versions") from None


def checkpoint_wipes(bootstrap: str, job: str, job_id: str, model: Any, *, security: Any = None,
                     timeout_s: float = 30.0, notes: list[str] | None = None) -> dict[str, str]:
    """Active task -> why the job's next start deletes every store dir of it along with the whole logged store
    base dir (see the module doc): its container reads no checkpoint for any of its active tasks
    (ContainerStorageManager.restoreStores; KafkaCheckpointManager.readLastCheckpoint: the task's latest live
    record of a version in task.checkpoint.read.versions), or another container that does so last ran on its
    host (the job's locality), where containers share the dir (job.logged.store.base.dir, LOGGED_STORE_BASE_DIR).
    Every active task of a BATCH application with a run id: each run reads a checkpoint topic of its own, empty
    when it starts (:func:`new_run_topic`). Empty when statectl cannot tell: checkpoints outside Kafka (a note
    says so). The checkpoint topic is read with the model's config (catalog.kafka_log). Raises ConfigError for a
    read-versions value Samza cannot parse; StatectlError when the brokers cannot be reached."""
    from statectl.catalog.kafka_log import KafkaCheckpointLog
    from statectl.formats.checkpoint import KEY_TYPE_V1, KEY_TYPE_V2

    notes = notes if notes is not None else []
    config, tasks = model.config, job_tasks(model)
    factory = (config.get(CHECKPOINT_FACTORY) or "").strip()
    if not factory:
        why = (f"the job has no {CHECKPOINT_FACTORY}: each container reads no checkpoint and deletes the whole "
               "state dir at every start (ContainerStorageManager)")
        return {t: why for t in tasks}
    if factory != KAFKA_CHECKPOINT_FACTORY:
        notes.append(f"{CHECKPOINT_FACTORY}={factory}: statectl reads only Kafka checkpoint topics; a container "
                     "that reads no checkpoint for any of its active tasks deletes the whole state dir at start: "
                     "not checked")
        return {}
    versions, batch = checkpoint_read_versions(config), new_run_topic(config)
    with KafkaCheckpointLog(bootstrap, job, job_id, timeout_s=timeout_s, security=security, config=config) as log:
        if batch:
            why = (f"{batch}, with no checkpoint when the run starts (this run's is {log.topic}): "
                   "its containers read none and delete the whole state dir (ContainerStorageManager)")
            return {t: why for t in tasks}
        kinds = log.task_key_types()
        topic = log.topic
    version_of = {KEY_TYPE_V1: 1, KEY_TYPE_V2: 2}
    has = {t for t, types in (kinds or {}).items()
           if any(live and version_of.get(k) in versions for k, live in types.items())}
    unread = {t for t, types in (kinds or {}).items() if any(types.values())} - has

    def detail(active: list[str]) -> str:
        if kinds is None:
            return f"checkpoint topic {topic} does not exist"
        mine = sorted(set(active) & unread)
        if mine:
            return (f"{_names(mine)} only {'has' if len(mine) == 1 else 'have'} checkpoints of versions "
                    f"{READ_VERSIONS}={','.join(map(str, versions))} does not read")
        return f"none in {topic}"

    return _wiped_tasks(model, tasks, has, detail)


def new_run_topic(config: Mapping[str, str]) -> str | None:
    """Why each run of the job reads a checkpoint topic no earlier run wrote, or None: a BATCH application with
    an app.run.id names its checkpoint topic after it (StreamManager.createUniqueNameForBatch), and every run
    gets a new one (RemoteJobPlanner.prepareJobs; a standalone job's RunIdGenerator when its first processor
    joins), the previous run's topic cleared (StreamManager.clearStreamsFromPreviousRun)."""
    from statectl.formats.jobconfig import batch_suffix

    if not batch_suffix(config):
        return None
    return "app.mode=BATCH: each run of the job gets a new app.run.id and a checkpoint topic named after it"


def _wiped_tasks(model: Any, tasks: list[str], has: set[str], detail: Callable[[list[str]], str]) -> dict[str, str]:
    """checkpoint_wipes per container: its own reason, else that of a wiping container on its host."""
    containers: dict[str | None, list[str]] = {}
    for t, c in model.task_containers.items():
        containers.setdefault(c, [])
        if model.task_modes.get(t, "Active") != "Standby":
            containers[c].append(t)
    if not model.task_containers:
        containers[None] = list(tasks)
    wiping: dict[str | None, str] = {}
    for c, active in containers.items():
        who = "the job" if c is None else f"container {c}"
        if not active:
            wiping[c] = (f"{who} runs only standby tasks: it reads no checkpoint and deletes the whole state dir at "
                         "every start (ContainerStorageManager)")
        elif not set(active) & has:
            named = _names(sorted(active, key=_task_key))
            wiping[c] = (f"{who} reads no checkpoint for any of its active tasks ({named}: {detail(active)}): it "
                         "deletes the whole state dir at start (ContainerStorageManager)")
    hosts = model.container_hosts
    out: dict[str, str] = {}
    for c, active in containers.items():
        host = hosts.get(c) if c is not None else None
        other = next((o for o in sorted(wiping, key=str) if o != c and host and hosts.get(o) == host), None)
        for t in active:
            if c in wiping:
                out[t] = wiping[c]
            elif other is not None:
                out[t] = (f"{wiping[other]}; it last ran on host {host}, as container {c} of this task did, and "
                          "containers on one host share the state dir")
    return out


def _names(tasks: list[str], limit: int = 3) -> str:
    return ", ".join(tasks[:limit]) + (f" and {len(tasks) - limit} more" if len(tasks) > limit else "")


def read_job_model(bootstrap: str, job: str, job_id: str, *, security: Any = None, timeout_s: float = 30.0,
                   zookeeper: str | None = None) -> Any:
    """The job model: on the job's coordinator stream (NotFoundError when there is none), or with ``zookeeper``
    a standalone job's in ZooKeeper (engine.jobmodel.read_job_model)."""
    from statectl.engine.jobmodel import read_job_model as read

    return read(bootstrap, job, job_id, zookeeper=zookeeper, security=security, timeout_s=timeout_s,
                required=True)[0]


def job_tasks(model: Any) -> list[str]:
    """The job's active tasks: those assigned to containers (standbys left out), else those of its changelog
    partition mapping."""
    tasks = [t for t in model.task_containers if model.task_modes.get(t, "Active") != "Standby"]
    if not tasks:
        tasks = [t for t in model.changelog_partitions if not t.startswith("Standby-")]
    return sorted(tasks, key=_task_key)
