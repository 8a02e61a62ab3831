"""The job side for Python stream jobs: a drain-aware runtime on kafka-python, whose bounded inputs end
(end of stream, as a Samza batch job's). It is a library for job scripts, not part of the operations tool:
statectl's commands never import it (an import-linter contract holds that). docs/pipeline.md describes it.

A job is a :class:`~statectl.pipeline.spec.JobSpec` of stages; each stage's tasks implement
``process(message, out)`` (pipeline.task). :func:`~statectl.pipeline.runner.main` is a job script's
entry point (pipeline.runner: the job's coordinator; pipeline.container: one stage's process, with its
tasks' state in pipeline.state, their control messages in pipeline.control and pipeline.channel).
examples/pageviews is a complete two-stage job.
"""

from statectl.pipeline.runner import main
from statectl.pipeline.spec import JobSpec, StageSpec
from statectl.pipeline.task import Collector, KeyValueStore, Message, TaskContext

__all__ = ["Collector", "JobSpec", "KeyValueStore", "Message", "StageSpec", "TaskContext", "main"]
