"""adstore load configured by the job: what a load's flags leave unset, taken from the job's config
and job model on its coordinator stream, as Samza's SideInputsManager would fill the store.

- Topics: the store's side inputs (``stores.<s>.side.inputs``, or ``stores.<s>.adstore.input``;
  formats.sideinputs.side_inputs), all on one system (its name goes into the offset files). ``--topic``
  overrides.
- Serdes: ``stores.<s>.key.serde`` / ``msg.serde`` -> ``serializers.registry.<name>.class``
  (formats.sideinputs.store_serdes). ``--key-serde`` / ``--value-serde`` override; an extractor or
  ``--key-field``/``--value-field`` replace them (Samza applies no identity processor then).
- A Java processor (``stores.<s>.side.inputs.processor.factory`` / ``.serialized.instance``, or
  ``adstore.key.value.extractor.factory``) cannot run here: ConfigError naming the key unless the flags say
  what it does (``--extractor``, ``--key-field``, ``--value-field``).
- Which task dir holds which partitions: the job's active tasks and GroupByPartition, or the SSPs a
  standalone job's model in ZooKeeper gives each task (``--zookeeper``; engine.adstore.status
  .job_side_input_ssps). ``--partitions`` or ``--broadcast`` override.
- Where: the side inputs are read on the brokers the job's config gives their system
  (``systems.<system>.consumer.bootstrap.servers``, with that system's consumer security: kafka.systems),
  which may be another cluster than the job's coordinator stream (``--kafka``).
- Whether the job's next start deletes the whole state dir, the loaded stores with it (no checkpoint for the
  container's active tasks: engine.adstore.status.checkpoint_wipes): a note after the load.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from statectl.errors import ConfigError
from statectl.progress import ProgressReporter


def from_job(opts: Any, progress: ProgressReporter) -> Any:
    """``opts`` (engine.adstore.topic.TopicLoadOptions with ``job`` set) completed from the job (see the module
    doc); ``job`` and ``zookeeper`` cleared. Raises NotFoundError (exit 10: no coordinator stream, no model in
    ZooKeeper, no tasks, a side input that does not exist), ConfigError (exit 2, naming the key: a processor
    statectl cannot run, a serde it does not know, side inputs on several systems, a grouper it cannot map)."""
    from statectl.engine.adstore.status import checkpoint_wipes, read_job_model
    from statectl.formats.sideinputs import side_inputs

    model = read_job_model(opts.bootstrap, opts.job, opts.job_id, security=opts.security, timeout_s=opts.timeout_s,
                           zookeeper=opts.zookeeper)
    changes: dict[str, Any] = {"job": None, "zookeeper": None}
    _serdes(opts, model.config, changes)
    streams = side_inputs(model.config, opts.store)
    if not opts.all_topics:
        _side_input_topics(opts, model.config, streams, changes, progress)
    if opts.partitions is None and not opts.broadcast and opts.state_dir is not None:
        _task_partitions(opts, model, streams, changes, progress)
    _broadcast(opts, model, changes)
    if opts.state_dir is not None:
        wipes = checkpoint_wipes(opts.bootstrap, opts.job, opts.job_id, model, security=opts.security,
                                 timeout_s=opts.timeout_s)
        changes["wiped_tasks"] = tuple(sorted(wipes.items()))
    out = dataclasses.replace(opts, **changes)
    out.validate()
    return out


def _serdes(opts: Any, config: dict[str, str], changes: dict[str, Any]) -> None:
    """The store's serdes from the job, unless flags say what makes the entries; ConfigError for a Java
    processor nothing replaces."""
    from statectl.formats.sideinputs import processor_keys, store_serdes

    keys = processor_keys(config, opts.store)
    if keys and not opts.transforms:
        raise ConfigError(f"{keys[0]}={config[keys[0]]}: the job fills store {opts.store} with a Java processor, "
                          "which statectl cannot run", hint="say what it does with --extractor (or --key-field/"
                                                            "--value-field), or load with the flags alone")
    if not opts.transforms:
        kserde, vserde = store_serdes(config, opts.store)
        if opts.key_serde is None and kserde is not None:
            changes["key_serde"] = kserde
        if opts.value_serde is None and vserde is not None:
            changes["value_serde"] = vserde


def _side_input_topics(opts: Any, config: dict[str, str], streams: list[Any], changes: dict[str, Any],
                       progress: ProgressReporter) -> None:
    """The topics (the store's side inputs, on one system) and the brokers they are read on."""
    from statectl.formats.sideinputs import side_inputs_key
    from statectl.kafka.systems import system_brokers

    if not streams:
        raise ConfigError(f"job {opts.job}-{opts.job_id} has no side inputs for store {opts.store} (no "
                          f"{side_inputs_key(opts.store)} or stores.{opts.store}.adstore.input)",
                          hint="pass --topic, or check --store and --job")
    systems = sorted({ss.system for ss in streams})
    if len(systems) > 1:
        raise ConfigError(f"{side_inputs_key(opts.store)}: side inputs on several systems ({', '.join(systems)}); "
                          "adstore load reads one Kafka cluster", hint="pass --topic for the ones on --kafka")
    changes["topic"] = streams[0].stream
    changes["topics"] = tuple(ss.stream for ss in streams)
    changes["system"] = systems[0]
    brokers = system_brokers(config, systems[0], opts.bootstrap, opts.security)
    if brokers.elsewhere:
        progress.note(f"reading the side inputs of store {opts.store} on {brokers.bootstrap}, the brokers of "
                      f"system {systems[0]} ({brokers.key} in the config of job {opts.job}-{opts.job_id})")
        changes.update(bootstrap=brokers.bootstrap, security=brokers.security)


def _task_partitions(opts: Any, model: Any, streams: list[Any], changes: dict[str, Any],
                     progress: ProgressReporter) -> None:
    """Which task dir holds which side-input partitions: the job model's mapping (``task_ssps``), unless
    ``--topic`` names streams that are not the store's side inputs."""
    from statectl.engine.adstore.status import job_side_input_ssps, job_tasks

    topics = changes.get("topics") or opts.all_topics
    if opts.all_topics and not set(topics) <= {ss.stream for ss in streams}:
        progress.note(f"--topic names streams that are not the side inputs of store {opts.store} in job "
                      f"{opts.job}-{opts.job_id}: the stores are Partition k, as without --job")
        return
    mapping = job_side_input_ssps(opts.bootstrap, opts.job, opts.job_id, opts.store, security=opts.security,
                                  timeout_s=opts.timeout_s, config=model.config, tasks=job_tasks(model),
                                  task_ssps=model.task_ssps)
    task_ssps = []
    for task, ssps in mapping.items():
        parts = tuple(sorted((s.stream, s.partition) for s in ssps if s.stream in topics))
        if parts:
            task_ssps.append((task, parts))
        else:
            progress.note(f"task {task} of job {opts.job}-{opts.job_id} has no side-input partitions of "
                          f"store {opts.store}: no store to load for it")
    changes["task_ssps"] = tuple(task_ssps)


def _broadcast(opts: Any, model: Any, changes: dict[str, Any]) -> None:
    """A broadcast store in every task of the job; or, when every task holds the same partitions
    (task.broadcast.inputs), one store built once and linked into the others."""
    from statectl.engine.adstore.status import job_tasks

    if opts.broadcast and not opts.tasks and opts.state_dir is not None and opts.store_dir is None:
        changes["tasks"] = tuple(job_tasks(model))  # Samza: every task keeps the broadcast store
    elif len(changes.get("task_ssps") or ()) > 1 and len({parts for _, parts in changes["task_ssps"]}) == 1:
        tasks = tuple(task for task, _ in changes["task_ssps"])
        parts = changes["task_ssps"][0][1]
        changes.update(task_ssps=None, broadcast=True, tasks=tasks, task=tasks[0],
                       partitions=tuple(sorted({p for _, p in parts})))
