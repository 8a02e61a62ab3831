"""Kafka's probe for ``statectl doctor``: the brokers answer, and the job's Samza topics are usable.

- ``kafka``: the brokers answer a metadata request within the timeout.
- ``checkpoint topic`` / ``coordinator topic``: with a job, its checkpoint topic and coordinator stream exist
  with the single partition Samza needs. Only metadata is asked for: asking for offsets could make some
  brokers (Tansu) create a topic.

The checkpoint topic is then read to its end. A Samza job reads only v1 checkpoints (key type
``checkpoint``) unless ``task.checkpoint.read.versions`` includes 2 (TaskConfig); statectl writes v2
checkpoints (``checkpoint-v2``). When some task has a v2 checkpoint but no v1 one, such a job would find
no checkpoint for it: the check stays ok, and its detail says so (with a hint).
"""

from __future__ import annotations

from typing import Any

from statectl.errors import StatectlError, UsageError
from statectl.kafka.client import DEFAULT_TIMEOUT_S
from statectl.probe import FAIL, OK, SKIP, UNEXPECTED_HINT, Check

KAFKA, CHECKPOINT_TOPIC, COORDINATOR_TOPIC = "kafka", "checkpoint topic", "coordinator topic"
NAMES = (KAFKA, CHECKPOINT_TOPIC, COORDINATOR_TOPIC)

READ_VERSIONS_HINT = ("add task.checkpoint.read.versions=2,1 to the job's config: with Samza's default (1) the job "
                      "sees no checkpoint for a task that has only v2 checkpoints")


def probe(bootstrap: str | None, *, job: str | None = None, job_id: str = "1", timeout_s: float = DEFAULT_TIMEOUT_S,
          security: Any = None) -> list[Check]:
    """The ``kafka``, ``checkpoint topic`` and ``coordinator topic`` checks (see the module doc).

    Without ``bootstrap`` all three are skipped; without ``job`` the topic checks are; when the brokers do
    not answer, the topic checks are skipped as not checked. ``security`` is a kafka.client.KafkaSecurity
    (None: PLAINTEXT). Raises UsageError for a bootstrap list or job name that cannot work; every other
    outcome is a check's. Reads only: never creates a topic or writes a record.
    """
    if not bootstrap:
        return [Check(name, SKIP, "no --kafka given") for name in NAMES]
    from statectl.kafka.client import open_consumer, unreachable

    consumer = None
    try:
        consumer = open_consumer(bootstrap, timeout_s=timeout_s, security=security)
        try:
            topics = set(consumer.topics())
        except Exception as e:  # kafka-python's errors: the brokers stopped answering
            raise unreachable(bootstrap, e, security) from e
        brokers = Check(KAFKA, OK, f"brokers {bootstrap} answer ({len(topics)} topic{'s' if len(topics) != 1 else ''})")
        if not job:
            hint = "pass --job (and --job-id) to check the job's topics"
            return [brokers, Check(CHECKPOINT_TOPIC, SKIP, "no --job given", hint),
                    Check(COORDINATOR_TOPIC, SKIP, "no --job given", hint)]
        from statectl.formats.checkpoint import checkpoint_topic
        from statectl.formats.coordinator import coordinator_topic

        checkpoint, coordinator = checkpoint_topic(job, job_id), coordinator_topic(job, job_id)
        if coordinator in topics:  # a BATCH application's checkpoint topic carries its run id
            checkpoint += _batch_suffix(bootstrap, job, job_id, timeout_s, security)
        checkpoint_check = _topic_check(consumer, CHECKPOINT_TOPIC, checkpoint, topics, bootstrap,
                                        "check --job and --job-id; the topic appears with the job's first "
                                        "checkpoint or the first statectl backup with --kafka")
        if checkpoint_check.status == OK:
            checkpoint_check = _checkpoint_versions(checkpoint_check, checkpoint, bootstrap, timeout_s, security)
        return [brokers, checkpoint_check,
                _topic_check(consumer, COORDINATOR_TOPIC, coordinator, topics, bootstrap,
                             "check --job and --job-id; the job creates its coordinator stream when it first starts "
                             "(drain and standby need it)")]
    except UsageError:
        raise
    except StatectlError as e:  # MissingDependencyError, AuthError and the unreachable brokers included
        failed = Check(KAFKA, FAIL, str(e), e.hint)
    except Exception as e:
        failed = Check(KAFKA, FAIL, f"kafka {bootstrap}: unexpected {type(e).__name__}: {e}", UNEXPECTED_HINT)
    finally:
        if consumer is not None:
            try:
                consumer.close()
            except Exception:
                pass
    not_checked = "not checked: the brokers did not answer" if job else "no --job given"
    return [failed, Check(CHECKPOINT_TOPIC, SKIP, not_checked), Check(COORDINATOR_TOPIC, SKIP, not_checked)]


def _topic_check(consumer: Any, name: str, topic: str, topics: set[str], bootstrap: str, hint: str) -> Check:
    if topic not in topics:
        return Check(name, FAIL, f"topic {topic} does not exist on {bootstrap}", hint)
    try:
        partitions = consumer.partitions_for_topic(topic)
    except Exception as e:
        return Check(name, FAIL, f"cannot read the partitions of {topic} on {bootstrap}: {e}")
    n = len(partitions or ())
    if n != 1:
        return Check(name, FAIL, f"topic {topic} has {n} partitions; Samza reads and writes only one",
                     "recreate it with a single partition")
    return Check(name, OK, f"topic {topic} exists (1 partition)")


def _checkpoint_versions(exists: Check, topic: str, bootstrap: str, timeout_s: float, security: Any) -> Check:
    """``exists`` (the topic's ok check), with a note when some task has v2 checkpoints but no v1 one; a
    failed check when the topic cannot be read."""
    from statectl.formats.checkpoint import KEY_TYPE_V1, KEY_TYPE_V2, decode_key
    from statectl.kafka.compacted import CompactedTopic

    log = CompactedTopic(bootstrap, topic, 0, decode=decode_key, ident=lambda k: (k.task, k.type),
                         timeout_s=timeout_s, security=security)
    try:
        log.refresh()
        live = [rec.key for rec in log.latest.values() if rec.value is not None]  # None: deleted (a tombstone)
    except StatectlError as e:
        return Check(CHECKPOINT_TOPIC, FAIL, f"topic {topic} exists but cannot be read: {e}", e.hint)
    except Exception as e:
        return Check(CHECKPOINT_TOPIC, FAIL, f"topic {topic} exists but cannot be read: unexpected "
                                             f"{type(e).__name__}: {e}", UNEXPECTED_HINT)
    finally:
        try:
            log.close()
        except Exception:
            pass
    v1 = {k.task for k in live if k.type == KEY_TYPE_V1}
    v2 = {k.task for k in live if k.type == KEY_TYPE_V2}
    v2_only = sorted(v2 - v1)
    if not v2_only:
        return exists
    how = ("the job reads them only with task.checkpoint.read.versions including 2 "
           "(e.g. task.checkpoint.read.versions=2,1)")
    if not v1:
        tasks = f"{len(v2_only)} task{'s' if len(v2_only) != 1 else ''}"
        note = f"it holds only v2 checkpoints ({tasks}): {how}"
    else:
        note = f"{len(v2_only)} of {len(v1 | v2)} tasks have only v2 checkpoints ({_names(v2_only)}): {how}"
    return Check(CHECKPOINT_TOPIC, OK, f"{exists.detail}; {note}", READ_VERSIONS_HINT)


def _names(tasks: list[str], limit: int = 3) -> str:
    shown = ", ".join(repr(t) for t in tasks[:limit])
    return shown + (f" and {len(tasks) - limit} more" if len(tasks) > limit else "")


def _batch_suffix(bootstrap: str, job: str, job_id: str, timeout_s: float, security: Any) -> str:
    """``-<app.run.id>`` when the job's config (its coordinator stream) makes it a BATCH application
    (KafkaUtil.getCheckpointTopic); "" otherwise, and when the stream cannot be read."""
    from statectl.errors import StatectlError
    from statectl.formats.jobconfig import batch_suffix
    from statectl.kafka.coordinator import CoordinatorStream

    try:
        with CoordinatorStream(bootstrap, job, job_id, timeout_s=timeout_s, security=security) as cs:
            return batch_suffix(cs.config()) if cs.refresh() else ""
    except StatectlError:
        return ""
