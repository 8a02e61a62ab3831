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


def test_a_terminal_shows_the_status_figures_beside_the_bar_and_on_lines_of_their_own():
    import io

    from rich.console import Console

    from statectl.cli.progress import RichProgress

    out = io.StringIO()
    display = RichProgress(Console(file=out, force_terminal=True, width=160, markup=False, highlight=False))
    display.status("Spark build of x", stages=1, stages_total=3, rows=100)
    display.start("loading data", 0, 2)
    display.advance(2048)
    display.status("loading data", rows=12345)
    display.status("replica /r", offset=499, lag=0, lag_s=0.0)
    display.close()
    shown = out.getvalue()
    assert "Spark build of x" in shown and "stages 1/3  rows 100" in shown
    assert "loading data" in shown and "2.0/? KiB" in shown and "rows 12,345" in shown
    assert "replica /r" in shown and "offset 499  lag 0 / 0.0s" in shown
    assert shown.rfind("\x1b[?25h") > shown.rfind("\x1b[?25l")  # the display ended: the cursor shown again


def test_a_status_without_figures_ends_its_line_and_the_display_when_nothing_is_left():
    import io

    from rich.console import Console

    from statectl.cli.progress import RichProgress

    out = io.StringIO()
    display = RichProgress(Console(file=out, force_terminal=True, width=160, markup=False, highlight=False))
    display.status("replica /r", offset=1, lag=None)
    assert "\x1b[?25h" not in out.getvalue()  # drawing (the cursor hidden)
    display.status("replica /r")
    assert out.getvalue().rfind("\x1b[?25h") > out.getvalue().rfind("\x1b[?25l")


def test_figures_read_as_words():
    from statectl.cli.progress import figures_text

    assert figures_text({"stages": 2, "stages_total": 5, "rows": 1_000_000}) == "stages 2/5  rows 1,000,000"
    assert figures_text({"offset": None, "lag": None, "lag_s": None}) == "offset ?  lag ? / ?"
    assert figures_text({"checkpoint": "c-1", "lag": 1, "lag_s": 3.25}) == "checkpoint c-1  lag 1 / 3.2s"
