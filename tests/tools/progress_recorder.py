"""A ProgressReporter that records every call, for tests that check what an operation reports as it runs."""

from __future__ import annotations

import threading
from typing import Any

from statectl.progress import ProgressReporter


class Recorder(ProgressReporter):
    """Every call in ``calls`` as (method, arguments), in order; thread-safe."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.notes: list[str] = []
        self._lock = threading.Lock()

    def _add(self, call: tuple[str, Any]) -> None:
        with self._lock:
            self.calls.append(call)

    def start(self, description: str, total_bytes: int, total_files: int) -> None:
        self._add(("start", description))

    def advance(self, nbytes: int) -> None:
        self._add(("advance", nbytes))

    def file_done(self) -> None:
        self._add(("file_done", None))

    def stop(self) -> None:
        self._add(("stop", None))

    def note(self, message: str) -> None:
        self.notes.append(message)
        self._add(("note", message))

    def status(self, subject: str, **figures: Any) -> None:
        self._add(("status", (subject, figures)))

    def statuses(self, prefix: str) -> list[dict[str, Any]]:
        """The figures of every status of a subject starting with ``prefix`` (an ending one: {})."""
        with self._lock:
            return [c[1][1] for c in self.calls if c[0] == "status" and c[1][0].startswith(prefix)]
