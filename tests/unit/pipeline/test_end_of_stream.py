"""End of stream and the drain callback timeout, without a broker: EndStates shared by the drain and the
end of stream, their saved states, the run bounds, bounded sources and task.callback.drain.timeout.ms in
the job spec, and callback_deadline."""

from __future__ import annotations

import json
import threading
import time

import pytest

from statectl.formats.checkpoint import SSP
from statectl.pipeline.deadline import CallbackTimeoutError, callback_deadline
from statectl.pipeline.control import (
    DRAIN_STATES_NAMESPACE,
    RUN_BOUNDS_NAMESPACE,
    DrainStates,
    EndOfStreamStates,
    EndStates,
    RunBounds,
    load_drain_states,
    load_end_states,
    load_run_bounds,
    save_drain_states,
    save_run_bounds,
)
from statectl.pipeline.spec import JobSpec, StageSpec, settable, with_config
from tests.unit.pipeline.test_control import FakeCoordinator

S0 = SSP("kafka", "shuffle", 0)
SRC = SSP("kafka", "PageViews", 0)


def test_drain_and_end_of_stream_are_one_class():
    # Samza's DrainStates and EndOfStreamStates are the same code; statectl keeps one.
    assert DrainStates is EndStates and EndOfStreamStates is EndStates
    st = EndOfStreamStates([S0, SRC], {"shuffle": 2})
    assert st.producer_ended(S0, "a", 0) is False and st.producers(S0) == {"a"} and st.expected(S0) == 2
    assert st.producer_ended(S0, "b", 1) is True
    assert st.all_ended() is False
    st.mark_ended(S0)
    st.mark_ended(SRC)
    assert st.all_ended() and st.is_ended(SRC)


def test_end_of_stream_states_are_saved_beside_the_drain_states():
    c = FakeCoordinator()
    drain = {"kafka.shuffle.0": {"a": 4}}
    eos = {"kafka.shuffle.0": {"b": 2, "c": 7}}
    save_drain_states(c, "count-Partition 0", "R1", drain, eos)  # type: ignore[arg-type]
    value = json.loads(c.rows[(DRAIN_STATES_NAMESPACE, "count-Partition 0")])
    assert value["producers"] == drain and value["endOfStream"] == eos
    assert load_end_states(c, "count-Partition 0", "R1") == (drain, eos)  # type: ignore[arg-type]
    assert load_drain_states(c, "count-Partition 0", "R1") == drain  # type: ignore[arg-type]
    assert load_end_states(c, "count-Partition 0", "R2") == ({}, {})  # type: ignore[arg-type]
    save_drain_states(c, "count-Partition 1", "R1", drain)  # type: ignore[arg-type]  # an older record: no eos
    assert "endOfStream" not in json.loads(c.rows[(DRAIN_STATES_NAMESPACE, "count-Partition 1")])
    assert load_end_states(c, "count-Partition 1", "R1") == (drain, {})  # type: ignore[arg-type]
    # An earlier runtime's record, producers without offsets: covered by any checkpoint, as it took them.
    earlier = {"runId": "R1", "producers": {"kafka.shuffle.0": ["a"]}}
    c.put(DRAIN_STATES_NAMESPACE, "count-Partition 2", json.dumps(earlier).encode())
    assert load_end_states(c, "count-Partition 2", "R1") == (  # type: ignore[arg-type]
        {"kafka.shuffle.0": {"a": -1}}, {})


def test_run_bounds_are_written_once_per_run():
    c = FakeCoordinator()
    first = RunBounds("R1", {"PageViews": {0: 300, 1: 0}}, {"shuffle": {0: 7, 1: 0}})
    assert save_run_bounds(c, first) == first  # type: ignore[arg-type]
    assert load_run_bounds(c, "R1") == first  # type: ignore[arg-type]
    # A coordinator restarted with the same run id keeps the ends its run started with.
    later = RunBounds("R1", {"PageViews": {0: 900, 1: 5}}, {"shuffle": {0: 70, 1: 3}})
    assert save_run_bounds(c, later) == first  # type: ignore[arg-type]
    assert load_run_bounds(c, "R1") == first  # type: ignore[arg-type]
    assert load_run_bounds(c, "R2") is None  # type: ignore[arg-type]
    assert first.source_end(SSP("kafka", "PageViews", 0)) == 300
    assert first.source_end(SSP("kafka", "Other", 0)) is None
    assert first.run_start(S0) == 7 and first.run_start(SSP("kafka", "shuffle", 5)) == 0
    c.put(RUN_BOUNDS_NAMESPACE, "R3", b"{not json")
    assert load_run_bounds(c, "R3") is None  # type: ignore[arg-type]


def job() -> JobSpec:
    return JobSpec("j", (StageSpec("split", object, inputs=("PageViews", "Clicks"), intermediate_outputs=("shuffle",)),
                         StageSpec("count", object, inputs=("shuffle",))), intermediate={"shuffle": 2})


def test_bounded_sources_in_the_config_and_back():
    j = job()
    assert j.sources == ("PageViews", "Clicks")
    cfg = j.config("R")
    assert cfg["app.mode"] == "STREAM" and not any(k.endswith(".samza.bounded") for k in cfg)
    half = with_config(j, {"streams.PageViews.samza.bounded": "true"})
    assert half.bounded == ("PageViews",) and half.config("R")["app.mode"] == "STREAM"
    assert half.config("R")["streams.PageViews.samza.bounded"] == "true"
    both = with_config(half, {"streams.Clicks.samza.bounded": "TRUE"})
    assert both.config("R")["app.mode"] == "BATCH"  # JobPlanner: every input bounded
    assert with_config(both, both.config("R")) == both
    assert with_config(both, {"streams.Clicks.samza.bounded": "false"}).bounded == ("PageViews",)
    with pytest.raises(ValueError, match="streams.shuffle.samza.bounded: 'shuffle' is not a source"):
        with_config(j, {"streams.shuffle.samza.bounded": "true"})
    with pytest.raises(ValueError, match="must be true or false"):
        with_config(j, {"streams.PageViews.samza.bounded": "yes"})


def test_the_drain_callback_timeout_in_the_config():
    j = job()
    assert j.drain_callback_timeout_s is None and "task.callback.drain.timeout.ms" not in j.config("R")
    t = with_config(j, {"task.callback.drain.timeout.ms": "1500"})
    assert t.drain_callback_timeout_s == 1.5 and t.config("R")["task.callback.drain.timeout.ms"] == "1500"
    assert with_config(t, t.config("R")) == t
    assert with_config(t, {"task.callback.drain.timeout.ms": "-1"}).drain_callback_timeout_s is None  # Samza's default
    with pytest.raises(ValueError, match="task.callback.drain.timeout.ms must be an integer"):
        with_config(j, {"task.callback.drain.timeout.ms": "1.5s"})
    assert settable("task.callback.drain.timeout.ms") and settable("streams.X.samza.bounded")
    assert settable("task.commit.ms") and not settable("task.callback.timeout.ms") and not settable("streams..samza.bounded")


def test_callback_deadline_interrupts_a_callback_that_overruns():
    started = time.monotonic()
    with pytest.raises(CallbackTimeoutError, match="too slow"):
        with callback_deadline(0.2, "too slow"):
            time.sleep(5)
    assert time.monotonic() - started < 2
    with callback_deadline(2.0, "never"):  # within the time: nothing
        time.sleep(0.05)
    with callback_deadline(None, "unbounded"):
        time.sleep(0.05)


def test_callback_deadline_catches_a_callback_that_swallowed_the_interruption():
    with pytest.raises(CallbackTimeoutError):
        with callback_deadline(0.1, "late"):
            try:
                time.sleep(0.5)
            except Exception:  # noqa: BLE001 - a task that catches everything
                time.sleep(0.3)


def test_callback_deadline_off_the_main_thread_checks_afterwards():
    errors = []

    def run() -> None:
        try:
            with callback_deadline(0.05, "late on a thread"):
                time.sleep(0.2)
        except CallbackTimeoutError as e:
            errors.append(str(e))

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert errors == ["late on a thread"]
