"""Progress on a terminal: rich bars with bytes, rate, ETA and files, on stderr only."""

from __future__ import annotations

import sys
import threading
from typing import Any

from statectl.progress import Figure, NullProgress, ProgressReporter


class RichProgress(ProgressReporter):
    """ProgressReporter drawing on stderr (use only when stderr is a TTY): one rich display holding the phase's
    bar and a line per status subject (its figures beside the bar when the subject is the phase's own)."""

    def __init__(self, console: Any):
        self._console = console
        self._lock = threading.RLock()
        self._progress: Any = None
        self._task: Any = None  # the phase's bar
        self._description = ""
        self._lines: dict[str, Any] = {}  # status subject -> its line's task
        self._files_total = 0
        self._files_done = 0
        self.notes: list[str] = []

    def _display(self) -> Any:
        """The display, started when first needed (the caller holds the lock)."""
        if self._progress is None:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            bar = [_OnBar(c) for c in (BarColumn(), DownloadColumn(binary_units=True), TransferSpeedColumn(),
                                       TimeRemainingColumn())]
            self._progress = Progress(TextColumn("{task.description}"), *bar, TextColumn("{task.fields[files]}"),
                                      TextColumn("{task.fields[figures]}"), console=self._console, transient=True)
            self._progress.start()
        return self._progress

    def start(self, description: str, total_bytes: int, total_files: int) -> None:
        with self._lock:
            self._files_total, self._files_done, self._description = total_files, 0, description
            figures = self._lines.pop(description, None)
            if figures is not None:  # the phase's own status line becomes its bar
                self._display().remove_task(figures)
            self._task = self._display().add_task(description, total=total_bytes or None, files=self._files(),
                                                  figures="", bar=True)

    def advance(self, nbytes: int) -> None:
        with self._lock:
            if self._task is not None:
                self._progress.advance(self._task, nbytes)

    def file_done(self) -> None:
        with self._lock:
            self._files_done += 1
            if self._task is not None:
                self._progress.update(self._task, files=self._files())

    def _files(self) -> str:
        """The files column: done of total; nothing for a phase that counts no files (total 0)."""
        return f"{self._files_done}/{self._files_total} files" if self._files_total else ""

    def status(self, subject: str, **figures: Figure) -> None:
        with self._lock:
            if self._task is not None and subject == self._description:
                self._progress.update(self._task, figures=figures_text(figures))
            elif not figures:
                line = self._lines.pop(subject, None)
                if line is not None:
                    self._progress.remove_task(line)
                    self._stop_if_idle()
            elif subject in self._lines:
                self._progress.update(self._lines[subject], figures=figures_text(figures))
            else:
                self._lines[subject] = self._display().add_task(subject, total=None, files="",
                                                                figures=figures_text(figures), bar=False)

    def stop(self) -> None:
        with self._lock:
            if self._task is not None:
                self._progress.remove_task(self._task)
                self._task, self._description = None, ""
                self._stop_if_idle()

    def _stop_if_idle(self) -> None:
        if self._progress is not None and not self._lines and self._task is None:
            self._progress.stop()
            self._progress = None

    def close(self) -> None:
        """End the display, whatever is still on it (the command is over)."""
        with self._lock:
            self._lines.clear()
            self._task = None
            self._stop_if_idle()

    def note(self, message: str) -> None:
        from statectl.redact import redact

        self.notes.append(message)
        self._console.print(f"note: {redact(message)}")


def figures_text(figures: dict[str, Figure]) -> str:
    """A status's figures as a terminal shows them: ``name value`` two spaces apart; ``x`` with ``x_total`` as
    ``x done/total``; a ``name_s`` in seconds (``x`` with ``x_s``: ``x value / 1.2s``); None as ``?``."""
    parts = []
    for name, value in figures.items():
        base = name[:-6] if name.endswith("_total") else name[:-2] if name.endswith("_s") else None
        if base is not None and base in figures:
            continue  # shown with its base figure
        text = _seconds(value) if name.endswith("_s") else _figure(value)
        if f"{name}_total" in figures:
            text += "/" + _figure(figures[f"{name}_total"])
        if f"{name}_s" in figures:
            text += " / " + _seconds(figures[f"{name}_s"])
        parts.append(f"{(name[:-2] if name.endswith('_s') else name).replace('_', ' ')} {text}")
    return "  ".join(parts)


def _seconds(value: Figure) -> str:
    return "?" if value is None else f"{float(value):.1f}s"


def _figure(value: Figure) -> str:
    return "?" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


class _OnBar:
    """A bar's column (bar, bytes, rate, ETA) that shows nothing on a status line."""

    def __init__(self, column: Any):
        self.column = column

    def __call__(self, task: Any) -> Any:
        return self.column(task) if task.fields.get("bar") else ""

    def get_table_column(self) -> Any:
        return self.column.get_table_column()


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
