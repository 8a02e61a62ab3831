"""drain: ask a running Samza(-compatible) job to stop after it has processed everything in flight, watch
it do so, and check its final commit.

The shell side of the protocol. ``start`` writes a DrainNotification for the job's current run (its
``app.run.id`` in the coordinator stream's ``set-config`` namespace) to the coordinator stream, as
Samza's DrainUtils does; the job's containers poll for it, stop fetching their sources, process what
their intermediate streams still hold, commit and stop; its coordinator then tombstones it.

Samza's containers run a DrainMonitor only with ``job.drain-monitor.enabled=true`` (JobConfig, default
false; ``Config.getBoolean``: "true" in any case, anything else false): ``start`` refuses otherwise.
A record of the ``samza-drain-v1`` namespace that Samza's DrainNotificationObjectMapper cannot read is
job-breaking: DrainMonitor reads every value of the namespace and throws, so a starting container fails
and a running one's poll dies; ``status`` names each, ``cancel --bad`` tombstones them.

The modules, one per concern, each used through its public names:

- ``model``: the states of a notification, the targets, results and errors every command shares;
- ``job``: the clients one command holds (coordinator stream, checkpoint topic, consumers);
- ``status``: reading a job's notifications and what is in flight on its intermediate streams;
- ``checkpoints``: the completion signal read from the job's checkpoints (for coordinators that never
  tombstone a notification) and the source input a drain left behind;
- ``start``, ``cancel``, ``wait``: the commands, each a plan computed first, then executed.

The job side of the protocol (a Python stream runtime that drains) is ``statectl.pipeline``, which the
operations tool never imports.
"""
