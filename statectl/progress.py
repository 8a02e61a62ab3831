"""How the engine reports progress and notes without printing: the caller hands in a ProgressReporter.

Every reporter keeps the notes it was given in ``notes`` (empty for one that keeps none), so an
operation returns them in its result as ``list(progress.notes)``; ``NoteRecorder`` keeps the notes of
one operation whatever reporter the caller handed in.
"""

from __future__ import annotations

from typing import Protocol, Sequence, Union

Figure = Union[int, float, str, None]


class ProgressReporter(Protocol):
    """Receives progress from engine operations; implementations must be thread-safe. A class that
    subclasses it gets a no-op for each method it leaves out, and no notes kept."""

    notes: Sequence[str] = ()
    """The notes received so far, in order (a reporter that keeps none: empty)."""

    def start(self, description: str, total_bytes: int, total_files: int) -> None:
        """A transfer phase begins."""

    def advance(self, nbytes: int) -> None:
        """``nbytes`` more bytes moved."""

    def file_done(self) -> None:
        """One more file finished."""

    def stop(self) -> None:
        """The current phase ended (successfully or not)."""

    def note(self, message: str) -> None:
        """A one-line remark for the operator (a warning or what was skipped); never the result."""

    def status(self, subject: str, **figures: Figure) -> None:
        """The current figures of ``subject`` (the phase's own description, or what else is going on: a
        Spark build, a replica), each replacing the last of its name: rows read, Spark ``stages`` done of
        ``stages_total``, a replica's offset and lag (a name ending ``_s``: seconds; None: unknown). A
        terminal shows them as the subject's line; a status without figures ends that line."""


class NullProgress(ProgressReporter):
    """Reports nothing but keeps the notes; the default for library callers and non-TTY runs."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def note(self, message: str) -> None:
        self.notes.append(message)


class NoteRecorder(ProgressReporter):
    """Forwards everything to ``inner`` (NullProgress when None) and keeps every note, so an operation
    returns its notes in its result whatever reporter the caller handed in."""

    def __init__(self, inner: ProgressReporter | None = None) -> None:
        self.inner = inner if inner is not None else NullProgress()
        self.notes: list[str] = []

    def start(self, description: str, total_bytes: int, total_files: int) -> None:
        self.inner.start(description, total_bytes, total_files)

    def advance(self, nbytes: int) -> None:
        self.inner.advance(nbytes)

    def file_done(self) -> None:
        self.inner.file_done()

    def stop(self) -> None:
        self.inner.stop()

    def note(self, message: str) -> None:
        self.notes.append(message)  # list.append is atomic: reporters are called from worker threads
        self.inner.note(message)

    def status(self, subject: str, **figures: Figure) -> None:
        self.inner.status(subject, **figures)
