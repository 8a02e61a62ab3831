"""The job side for Python stream jobs (seed 004): a drain-aware runtime on kafka-python, whose bounded
inputs end (end of stream, as a Samza batch job's).

A job is a :class:`~statectl.pipeline.spec.JobSpec` of stages; each stage's tasks implement
``process(message, out)`` (pipeline.task). :func:`~statectl.pipeline.runner.main` is a job script's
entry point. examples/pageviews is a complete two-stage job.
"""

from statectl.pipeline.runner import main
from statectl.pipeline.spec import JobSpec, StageSpec
from statectl.pipeline.task import Collector, KeyValueStore, Message, TaskContext

__all__ = ["Collector", "JobSpec", "KeyValueStore", "Message", "StageSpec", "TaskContext", "main"]
