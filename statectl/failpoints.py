"""Failpoints: named places in statectl where a test makes it die, stall or fail, to prove it copes.

``STATECTL_FAILPOINTS`` holds ``name=action`` pairs separated by commas, e.g.
``after-index-upload=kill,during-download=sleep:0.5``. An action is one or more terms joined by ``->``;
each term is ``[N*]kind``, and applies to the next N hits of the point (without ``N*``: to every hit
left), then the next term takes over. When the last counted term is used up, the point does nothing.
The kinds:

- ``kill``: the process SIGKILLs itself (a crash: no cleanup, no ``finally``).
- ``sleep:SECONDS``: pause, then go on (a slow step that another process can overtake).
- ``stop``: the process SIGSTOPs itself and goes on when sent SIGCONT: a step held for exactly as long as a
  test needs (it waits for the process's state to be stopped, runs what must overtake it, then continues it).
- ``raise``: raise :class:`FailpointError`, a StatectlError (exit code 1): a step that fails.
- ``raise:ERRNO``: raise ``OSError(errno.ERRNO)``, e.g. ``raise:ENOSPC`` for a full disk, ``raise:EIO``.
- ``off``: do nothing; with a count it lets the first hits pass: ``3*off->raise:ENOSPC`` fails from
  the fourth hit on, ``2*off->1*kill`` kills at the third only.

A bare ``name`` means ``name=kill``. A spec that does not parse is a UsageError when first read.

Subprocesses take the variable from their environment (read once, on the first hit). Tests that run
statectl in-process use :func:`active` instead, which also counts the hits::

    with failpoints.active("changelog-apply=2*off->raise:ENOSPC") as fp:
        ...
    assert fp.hits("changelog-apply") == 3

Unset in production: ``hit`` is then one dict lookup. The points, in the order an operation meets them:

- backup: ``before-upload``, ``during-upload`` (each file part), ``after-index-upload``,
  ``before-kafka-commit`` and ``after-kafka-commit`` (with ``--kafka``: between the pending catalog record,
  the commit to the checkpoint topic and the committed record), ``after-commit``, ``during-cleanup``,
  ``after-cleanup``. Stores of one task backed up as one checkpoint (backup_stores: a statectl.pipeline
  commit) meet each store's points up to ``after-index-upload`` in turn, the two Kafka ones once, then each
  store's from ``after-commit`` on.
- snapshots copy: ``during-copy`` (once, when the copy of half the blobs starts), then backup's
  ``after-index-upload``, ``before-kafka-commit``, ``after-kafka-commit``, ``after-commit``, ``during-cleanup``,
  ``after-cleanup``.
- restore: ``during-download`` (each blob range), ``download-write`` (each write into a restored file),
  ``before-swap`` (the store built aside and its reader pin confirmed, before the swap).
- changelog restore: ``changelog-apply`` (each write batch into the new store).
- standby follow and promote: ``standby-apply`` (each write batch into the replica); promote of a
  pre-restore: ``pre-restore-moved`` (after the pre-restored dir is renamed into the state dir).
- standby failover and promote --container: ``failover-step`` (after each step is journaled: the standby
  host found, each locality message, the follower stopped), ``failover-promoted`` (after each store's
  promote is journaled).
- adstore load --topic: ``adstore-apply`` (each write batch into a store); --from-file on the put path
  meets ``changelog-apply`` (each write batch into a version being built).
- adstore load --spark: ``adstore-ingest`` (before each store's SST files are ingested).
- rescale: ``rescale-ingest`` (before each target's SST files are ingested), ``rescale-uploaded`` (after each
  target's index is uploaded, TTL'd), ``rescale-before-commit`` (every target uploaded and verified,
  nothing recorded or committed), ``rescale-commit`` (before each target's checkpoint record: the rescale
  is recorded).
- adstore load --dataset-versions: ``adstore-apply`` (each write batch into a version being built),
  ``adstore-seal`` (before a version's manifest is written), ``adstore-dataset-switch`` (after the seal,
  before the switch).
- adstore seal-checkpoint: ``adstore-seal-checkpoint`` (before each task's first checkpoint is written, after
  the topic was read).
"""

from __future__ import annotations

import errno
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from statectl.errors import StatectlError, UsageError

ENV = "STATECTL_FAILPOINTS"


class FailpointError(StatectlError):
    """Raised by a failpoint whose action is ``raise``."""


_TERM = re.compile(r"(?:(\d+)\*)?(off|kill|stop|raise(?::([A-Z][A-Z0-9]*))?|sleep:(\d+(?:\.\d*)?|\.\d+))")


class _Point:
    """One configured failpoint: its terms, and how many times it was hit."""

    def __init__(self, name: str, action: str):
        self.name = name
        self.terms: list[tuple[int | None, str]] = []  # (remaining hits or None for all, kind)
        for term in action.split("->"):
            m = _TERM.fullmatch(term.strip())
            if m is None or (m.group(1) is not None and int(m.group(1)) == 0):
                raise UsageError(f"{ENV}: invalid action {action!r} for failpoint {name!r}",
                                 hint="terms are [N*]off|kill|stop|raise|raise:ERRNO|sleep:SECONDS, joined by '->'")
            if m.group(3) is not None and not isinstance(getattr(errno, m.group(3), None), int):
                raise UsageError(f"{ENV}: unknown errno {m.group(3)!r} for failpoint {name!r}")
            self.terms.append((int(m.group(1)) if m.group(1) else None, m.group(2)))
        self.hits = 0
        self._lock = threading.Lock()

    def _next(self) -> str:
        with self._lock:
            self.hits += 1
            if not self.terms:
                return "off"
            left, kind = self.terms[0]
            if left is not None:
                if left > 1:
                    self.terms[0] = (left - 1, kind)
                else:
                    self.terms.pop(0)
            return kind

    def fire(self) -> None:
        kind = self._next()
        if kind == "off":
            return
        if kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif kind == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        elif kind.startswith("sleep:"):
            time.sleep(float(kind[6:]))
        elif kind == "raise":
            raise FailpointError(f"failpoint {self.name}: injected failure")
        else:  # raise:ERRNO
            code = getattr(errno, kind[6:])
            raise OSError(code, f"{os.strerror(code)} (failpoint {self.name})")


_points: dict[str, _Point] | None = None


def parse(spec: str) -> dict[str, _Point]:
    """The failpoints of a spec (the format of ``STATECTL_FAILPOINTS``). Raises UsageError if it does not parse."""
    out = {}
    for item in filter(None, (p.strip() for p in spec.split(","))):
        name, _, action = item.partition("=")
        out[name.strip()] = _Point(name.strip(), action.strip() or "kill")
    return out


def hit(name: str) -> None:
    """Act on failpoint ``name`` if one is configured; otherwise do nothing."""
    global _points
    if _points is None:
        _points = parse(os.environ.get(ENV, ""))
    point = _points.get(name)
    if point is not None:
        point.fire()


def configure(spec: str | None) -> None:
    """Replace the failpoints of this process with ``spec`` ("" for none); None reads ``STATECTL_FAILPOINTS``
    again at the next hit. Raises UsageError if ``spec`` does not parse (the old ones then stay)."""
    global _points
    _points = None if spec is None else parse(spec)


class Active:
    """The failpoints :func:`active` configured; :meth:`hits` counts how often each was reached."""

    def __init__(self, points: dict[str, _Point]):
        self._points = points

    def hits(self, name: str) -> int:
        return self._points[name].hits


@contextmanager
def active(spec: str) -> Iterator[Active]:
    """Failpoints ``spec`` for the duration of the block (in this process, every thread), then the ones
    before it again, even when the block raises."""
    global _points
    before = _points
    points = parse(spec)
    _points = points
    try:
        yield Active(points)
    finally:
        _points = before
