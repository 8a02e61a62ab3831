"""The progress protocol: every reporter answers ``notes``, so an operation never probes for it."""

from __future__ import annotations

from statectl.cli.progress import NoteProgress
from statectl.progress import NoteRecorder, NullProgress, ProgressReporter


class Bare(ProgressReporter):
    """A library caller's reporter that implements nothing."""


def test_a_reporter_that_keeps_no_notes_has_none():
    bare = Bare()
    bare.start("x", 1, 1)
    bare.advance(1)
    bare.file_done()
    bare.stop()
    bare.note("seen by nobody")
    assert list(bare.notes) == []


def test_every_reporter_of_statectl_keeps_its_notes():
    for reporter in (NullProgress(), NoteProgress(quiet=True), NoteRecorder(Bare())):
        reporter.note("one")
        reporter.note("two")
        assert list(reporter.notes) == ["one", "two"]


def test_a_recorder_keeps_its_own_operation_notes_and_forwards_them():
    outer = NullProgress()
    outer.note("before")
    recorder = NoteRecorder(outer)
    recorder.note("during")
    assert recorder.notes == ["during"] and outer.notes == ["before", "during"]
