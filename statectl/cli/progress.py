"""Progress on a terminal: rich bars with bytes, rate, ETA and files, on stderr only."""

from __future__ import annotations

import sys
import threading
from typing import Any

from statectl.progress import NullProgress, ProgressReporter


class RichProgress(ProgressReporter):
    """ProgressReporter drawing a rich progress bar on stderr (use only when stderr is a TTY)."""

    def __init__(self, console: Any):
        self._console = console
        self._lock = threading.Lock()
        self._progress = None
        self._task = None
        self._files_total = 0
        self._files_done = 0
        self.notes: list[str] = []

    def start(self, description: str, total_bytes: int, total_files: int) -> None:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        with self._lock:
            self._files_total, self._files_done = total_files, 0
            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), DownloadColumn(binary_units=True),
                TransferSpeedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[files]}"),
                console=self._console, transient=True,
            )
            self._task = self._progress.add_task(description, total=total_bytes or None, files=self._files())
            self._progress.start()

    def advance(self, nbytes: int) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, nbytes)

    def file_done(self) -> None:
        with self._lock:
            self._files_done += 1
            if self._progress is not None:
                self._progress.update(self._task, files=self._files())

    def _files(self) -> str:
        """The files column: done of total; nothing for a phase that counts no files (total 0)."""
        return f"{self._files_done}/{self._files_total} files" if self._files_total else ""

    def stop(self) -> None:
        with self._lock:
            if self._progress is not None:
                self._progress.stop()
                self._progress = None

    def note(self, message: str) -> None:
        from statectl.redact import redact

        self.notes.append(message)
        self._console.print(f"note: {redact(message)}")


class NoteProgress(NullProgress):
    """No bars (not a TTY, --quiet, JSON, CI), but notes still go to stderr unless quiet."""

    def __init__(self, quiet: bool):
        super().__init__()
        self._quiet = quiet

    def note(self, message: str) -> None:
        super().note(message)
        if not self._quiet:
            from statectl.redact import redact

            sys.stderr.write(f"note: {redact(message)}\n")
            sys.stderr.flush()
