"""A side-input (adjunct) store as a Samza job's config describes it. Pure; no I/O.

- Its streams (:func:`side_inputs`): ``stores.<s>.side.inputs`` (StorageConfig.getSideInputs: split on
  commas, trimmed, blanks dropped; each a ``system.stream`` or a stream id, StreamUtil
  .getSystemStreamFromNameOrId) and the seed's ``stores.<s>.adstore.input`` (one system stream).
- How a record becomes an entry: a processor the job names (``stores.<s>.side.inputs.processor.factory``
  or ``.serialized.instance``, the seed's ``stores.<s>.adstore.key.value.extractor.factory``) is Java that
  statectl cannot run (:func:`processor_keys`); without one, SideInputsManager's identity processor with the
  store's serdes (:func:`store_serdes`: ``stores.<s>.key.serde`` / ``msg.serde`` ->
  ``serializers.registry.<name>.class``, formats.serdes).
- Which task holds which partitions (:func:`task_side_input_ssps`): the job's SSP grouper
  (GroupByPartition, Samza's default: task ``Partition k`` gets partition k of every input stream; the
  SSPs of ``task.broadcast.inputs`` go to every task, TaskConfig.getBroadcastSystemStreamPartitions), then
  SideInputsManager.getTaskSideInputSSPs keeps each task's SSPs of the store's side-input streams. A job
  model that lists each task's SSPs (a standalone job's, in ZooKeeper) says it itself, whatever the
  grouper (:func:`model_side_input_ssps`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from statectl.errors import ConfigError
from statectl.formats.checkpoint import SSP
from statectl.formats.jobconfig import DEFAULT_SYSTEM, SystemStream
from statectl.formats.serdes import KIND_OF_FACTORY

GROUPER = "job.systemstreampartition.grouper.factory"
GROUP_BY_PARTITION = "org.apache.samza.container.grouper.stream.GroupByPartitionFactory"
BROADCAST_INPUTS = "task.broadcast.inputs"
ELASTICITY = "job.elasticity.factor"
ENCODING = "encoding"  # StringSerdeFactory reads it from the whole config


def side_inputs_key(store: str) -> str:
    return f"stores.{store}.side.inputs"


def adstore_input_key(store: str) -> str:
    return f"stores.{store}.adstore.input"


def _stream(config: Mapping[str, str], name: str, key: str) -> SystemStream:
    """StreamUtil.getSystemStreamFromNameOrId: ``system.stream`` (exactly one dot), or a stream id:
    ``streams.<id>.samza.system`` (else ``job.default.system``) and ``streams.<id>.samza.physical.name``
    (else the id). ConfigError naming ``key`` otherwise."""
    parts = name.split(".")
    if len(parts) == 2 and all(parts):
        return SystemStream(parts[0], parts[1])
    if len(parts) == 1:
        system = config.get(f"streams.{name}.samza.system") or config.get(DEFAULT_SYSTEM)
        if not system:
            raise ConfigError(f"{key}={config.get(key)}: stream id {name!r} has no system (no "
                              f"streams.{name}.samza.system, no {DEFAULT_SYSTEM})")
        return SystemStream(system, config.get(f"streams.{name}.samza.physical.name", name))
    raise ConfigError(f"{key}={config.get(key)}: invalid stream {name!r}: expected a stream id or system.stream")


def side_inputs(config: Mapping[str, str], store: str) -> list[SystemStream]:
    """The store's side-input streams in the config's order, each once (empty: none). ConfigError (exit 2)
    naming the key for a stream Samza cannot resolve."""
    out: list[SystemStream] = []
    for key in (side_inputs_key(store), adstore_input_key(store)):
        for name in (n.strip() for n in (config.get(key) or "").split(",")):
            if name:
                ss = _stream(config, name, key)
                if ss not in out:
                    out.append(ss)
    return out


def processor_keys(config: Mapping[str, str], store: str) -> list[str]:
    """The keys that give the store a Java side-inputs processor (or the seed's key/value extractor):
    statectl cannot run it, so a load needs flags saying what it does (--extractor, --key-field...)."""
    keys = (f"stores.{store}.side.inputs.processor.serialized.instance",
            f"stores.{store}.side.inputs.processor.factory",
            f"stores.{store}.adstore.key.value.extractor.factory")
    return [k for k in keys if (config.get(k) or "").strip()]


def serde_kind(config: Mapping[str, str], key: str) -> str | None:
    """The serde kind (formats.serdes) the store key ``key`` (``stores.<s>.key.serde`` or ``msg.serde``)
    names: None when the key is absent (the bytes as they are). ConfigError (exit 2) naming the key for a
    serde statectl cannot honour: not registered (no ``serializers.registry.<name>.class``, as
    SamzaContainer builds serdes only for registered names), a serialized instance, a class outside the
    built-in ones, a StringSerde with an ``encoding`` other than UTF-8."""
    name = (config.get(key) or "").strip()
    if not name:
        return None
    cls_key = f"serializers.registry.{name}.class"
    inst_key = f"serializers.registry.{name}.samza.serialized.instance"
    if (config.get(inst_key) or "").strip():
        raise ConfigError(f"{key}={name}: {inst_key} is a serialized Java serde, which statectl cannot run",
                          hint="pass --key-serde/--value-serde, or --extractor")
    cls = (config.get(cls_key) or "").strip()
    if not cls:
        raise ConfigError(f"{key}={name}: the job's config registers no serde {name!r} (no {cls_key})",
                          hint="pass --key-serde/--value-serde")
    kind = KIND_OF_FACTORY.get(cls)
    if kind is None:
        raise ConfigError(f"{cls_key}={cls}: not a serde statectl knows (string, json, integer, long, double, "
                          "byte, bytebuffer)", hint="pass --key-serde/--value-serde, or --extractor")
    encoding = config.get(ENCODING, "UTF-8")
    if kind == "string" and encoding.upper().replace("_", "-") not in ("UTF-8", "UTF8"):
        raise ConfigError(f"{ENCODING}={encoding}: StringSerde with an encoding other than UTF-8 is not supported",
                          hint="pass --key-serde/--value-serde")
    return kind


def store_serdes(config: Mapping[str, str], store: str) -> tuple[str | None, str | None]:
    """(key serde kind, value serde kind) of the store (see :func:`serde_kind`)."""
    return serde_kind(config, f"stores.{store}.key.serde"), serde_kind(config, f"stores.{store}.msg.serde")


def broadcast_ssps(config: Mapping[str, str]) -> set[SSP]:
    """TaskConfig.getBroadcastSystemStreamPartitions: ``system.stream#N`` or ``system.stream#[N-M]``, comma
    separated. ConfigError naming the key for another form."""
    out: set[SSP] = set()
    value = config.get(BROADCAST_INPUTS) or ""
    for item in (v for v in re.split(r"\s*,\s*", value.strip()) if v):
        name, hash_, part = item.partition("#")
        if not hash_ or "." not in name:
            raise ConfigError(f"{BROADCAST_INPUTS}={value}: {item!r} is not system.stream#partition or "
                              "system.stream#[N-M]")
        system, _, stream = name.partition(".")
        if re.fullmatch(r"\d+", part):
            out.add(SSP(system, stream, int(part)))
        elif m := re.fullmatch(r"\[(\d+)-(\d+)\]", part):
            out.update(SSP(system, stream, p) for p in range(int(m.group(1)), int(m.group(2)) + 1))
        else:
            raise ConfigError(f"{BROADCAST_INPUTS}={value}: {item!r} is not system.stream#partition or "
                              "system.stream#[N-M]")
    return out


def task_side_input_ssps(config: Mapping[str, str], store: str, tasks: Iterable[str],
                         partition_counts: Mapping[SystemStream, int]) -> dict[str, set[SSP]]:
    """Each task's side-input SSPs of ``store`` (SideInputsManager.getTaskSideInputSSPs over the tasks'
    SSPs as GroupByPartition groups them): ``Partition k`` gets partition k of each side-input stream that
    has one, plus the broadcast SSPs of those streams. ``partition_counts``: each side-input stream's
    partition count. ConfigError (exit 2, naming the key) for another grouper, key buckets
    (``job.elasticity.factor`` > 1) or a task name GroupByPartition does not make."""
    grouper = (config.get(GROUPER) or GROUP_BY_PARTITION).strip()
    if grouper != GROUP_BY_PARTITION:
        raise ConfigError(f"{GROUPER}={grouper}: statectl maps tasks to side-input partitions only for "
                          "GroupByPartition", hint="pass --partitions (and --task) to say which partitions "
                                                   "each store holds")
    if (config.get(ELASTICITY) or "1").strip() not in ("1", ""):
        raise ConfigError(f"{ELASTICITY}={config[ELASTICITY]}: key buckets are not supported by adstore load")
    streams = side_inputs(config, store)
    bcast = {s for s in broadcast_ssps(config) if SystemStream(s.system, s.stream) in streams}
    out: dict[str, set[SSP]] = {}
    for task in tasks:
        m = re.fullmatch(r"Partition (\d+)", task)
        if m is None:
            raise ConfigError(f"task {task!r} of the job model is not one GroupByPartition makes "
                              f"('Partition N')", hint="pass --partitions to say which partitions it holds")
        k = int(m.group(1))
        ssps = {SSP(ss.system, ss.stream, k) for ss in streams if k < partition_counts.get(ss, 0)}
        out[task] = {s for s in ssps if s not in bcast} | bcast
    return out


def model_side_input_ssps(config: Mapping[str, str], store: str,
                          task_ssps: Mapping[str, Iterable[SSP]]) -> dict[str, set[SSP]]:
    """Each task's side-input SSPs of ``store`` from the SSPs its job model gives it (``task_ssps``: task ->
    SSPs, the grouper's work, broadcast ones included), as SideInputsManager.getTaskSideInputSSPs keeps them:
    those of the store's side-input streams. ConfigError (exit 2) for key buckets, as task_side_input_ssps."""
    streams = set(side_inputs(config, store))
    out = {t: {s for s in ssps if SystemStream(s.system, s.stream) in streams} for t, ssps in task_ssps.items()}
    bucketed = sorted(t for t, ssps in out.items() if any(s.key_bucket >= 0 for s in ssps))
    if bucketed:
        raise ConfigError(f"task {bucketed[0]!r} of the job model reads side inputs of store {store} by key bucket: "
                          "key buckets are not supported by adstore load")
    return out
