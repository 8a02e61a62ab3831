"""Samza's coordinator stream (FORMATS.md "Coordinator stream"): the job's metadata store topic.

Read off Samza's CoordinatorStreamUtil / KafkaSystemFactory (the topic name). Pure; no I/O.
"""

from __future__ import annotations

import re

from statectl.errors import UsageError

# Kafka's legal topic names.
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


def coordinator_topic(job: str, job_id: str) -> str:
    """``__samza_coordinator_<job>_<job-id>`` with ``_`` replaced by ``-`` in both names.

    Raises UsageError when the result is not a legal Kafka topic name.
    """
    topic = f"__samza_coordinator_{job.replace('_', '-')}_{job_id.replace('_', '-')}"
    if not _TOPIC.fullmatch(topic):
        raise UsageError(f"job {job!r} (id {job_id!r}) gives coordinator topic {topic!r}, which is not a legal "
                         "Kafka topic name", hint="job names and ids may use letters, digits, '.', '_' and '-'")
    return topic
