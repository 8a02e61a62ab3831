"""The job side of drain, without a broker: DrainStates and WatermarkStates book-keeping, the drain states
saved to the coordinator stream, and the job spec's config and timings."""

from __future__ import annotations

import json

import pytest

from statectl.engine.drain.status import intermediate_streams
from statectl.formats.checkpoint import SSP
from statectl.pipeline.control import (
    DRAIN_STATES_NAMESPACE,
    DrainStates,
    WatermarkStates,
    load_drain_states,
    save_drain_states,
)
from statectl.pipeline.spec import TIMINGS, JobSpec, StageSpec, stage_partitions, task_name, with_config

S0 = SSP("kafka", "shuffle", 0)
S1 = SSP("kafka", "shuffle", 1)
SRC = SSP("kafka", "PageViews", 0)
EXPECTED = {"shuffle": 2}  # two producer tasks write "shuffle"; PageViews is a source


# -- DrainStates -------------------------------------------------------------------------------------------


def test_drain_states_count_producers_per_partition():
    st = DrainStates([S0, S1, SRC], EXPECTED)
    assert st.producer_drained(S0, "split-Partition 0", 3) is False
    assert st.producer_drained(S0, "split-Partition 0", 9) is False  # the same producer twice counts once
    assert st.complete(S0) is False
    assert st.producer_drained(S0, "split-Partition 1", 10) is True
    assert st.complete(S0) is True
    assert st.complete(S1) is False  # partitions are counted apart
    assert st.producer_drained(S1, "split-Partition 1", 4) is False
    assert st.complete(S1) is False


def test_a_stream_without_producers_never_completes_by_producers():
    st = DrainStates([SRC, S0], EXPECTED)
    assert st.complete(SRC) is False
    assert st.producer_drained(SRC, "someone", 0) is False
    assert st.producer_drained(SRC, "someone else", 1) is False
    assert st.complete(SRC) is False
    st = DrainStates([S0], {})  # nobody produces to it as far as this task knows
    assert st.producer_drained(S0, "split-Partition 0", 0) is False and st.complete(S0) is False


def test_all_drained_needs_every_partition_marked():
    st = DrainStates([S0, S1, SRC], EXPECTED)
    assert st.all_drained() is False
    st.mark_drained(SRC)
    assert st.is_drained(SRC) and not st.is_drained(S0)
    st.mark_drained(S0)
    assert st.all_drained() is False
    st.mark_drained(S1)
    assert st.all_drained() is True
    assert DrainStates([], {}).all_drained() is True


def test_drain_states_export_and_load_round_trip():
    st = DrainStates([S0, S1, SRC], EXPECTED)
    st.producer_drained(S0, "split-Partition 1", 40)
    st.producer_drained(S0, "split-Partition 0", 12)
    st.producer_drained(S1, "split-Partition 0", 7)
    st.producer_drained(S0, "split-Partition 1", 90)  # read again (its producer restarted): the first counts
    saved = st.export()
    assert saved == {"kafka.shuffle.0": {"split-Partition 0": 12, "split-Partition 1": 40},
                     "kafka.shuffle.1": {"split-Partition 0": 7}}  # partitions without producers left out
    assert json.loads(json.dumps(saved)) == saved

    restarted = DrainStates([S0, S1, SRC], EXPECTED)
    checkpointed = {"kafka.shuffle.0": "40", "kafka.shuffle.1": "7"}
    restarted.load(saved | {"kafka.elsewhere.3": {"x": 1}}, checkpointed)  # a partition it no longer has: ignored
    assert restarted.export() == saved
    assert restarted.complete(S0) is True and restarted.complete(S1) is False
    assert restarted.producer_drained(S1, "split-Partition 1", 8) is True
    assert restarted.all_drained() is False  # loading producers marks nothing drained


def test_a_restart_counts_only_the_producers_its_checkpoint_covers():
    # The states are saved before the checkpoint is written: a task that died in between saved producers
    # whose messages its checkpoint does not cover. Counted, the partition would end without the records
    # before them; left out, they are read again with those records.
    saved = {"kafka.shuffle.0": {"split-Partition 0": 12, "split-Partition 1": 40}, "kafka.shuffle.1": {"a": 0}}
    st = DrainStates([S0, S1], EXPECTED)
    st.load(saved, {"kafka.shuffle.0": "39"})  # nothing of shuffle.1 checkpointed: all of it is read again
    assert st.producers(S0) == {"split-Partition 0"} and st.complete(S0) is False and st.producers(S1) == set()
    assert st.producer_drained(S0, "split-Partition 1", 40) is True  # read again
    assert st.export() == {"kafka.shuffle.0": {"split-Partition 0": 12, "split-Partition 1": 40}}


def test_load_merges_with_what_was_seen_since():
    st = DrainStates([S0], EXPECTED)
    st.producer_drained(S0, "split-Partition 1", 20)
    st.load({"kafka.shuffle.0": {"split-Partition 0": 5}}, {"kafka.shuffle.0": "19"})
    assert st.complete(S0) is True


class FakeCoordinator:
    """The two methods save/load_drain_states use, over a dict."""

    def __init__(self):
        self.rows: dict[tuple[str, str], bytes | None] = {}

    def put(self, namespace: str, key: str, value: bytes | None) -> int:
        self.rows[(namespace, key)] = value
        return len(self.rows)

    def namespace_values(self, namespace: str) -> dict[str, bytes | None]:
        return {k: v for (ns, k), v in self.rows.items() if ns == namespace}


def test_saved_drain_states_load_for_their_task_and_run_only():
    c = FakeCoordinator()
    states = {"kafka.shuffle.0": {"split-Partition 0": 3, "split-Partition 1": 8}}
    save_drain_states(c, "count-Partition 0", "R1", states)  # type: ignore[arg-type]
    assert list(c.rows) == [(DRAIN_STATES_NAMESPACE, "count-Partition 0")]
    value = json.loads(c.rows[(DRAIN_STATES_NAMESPACE, "count-Partition 0")])
    assert value["runId"] == "R1" and value["producers"] == states and isinstance(value["time"], int)

    assert load_drain_states(c, "count-Partition 0", "R1") == states  # type: ignore[arg-type]
    assert load_drain_states(c, "count-Partition 0", "R2") == {}  # type: ignore[arg-type]
    assert load_drain_states(c, "count-Partition 1", "R1") == {}  # type: ignore[arg-type]

    c.put(DRAIN_STATES_NAMESPACE, "count-Partition 1", b"{not json")
    c.put(DRAIN_STATES_NAMESPACE, "count-Partition 2", None)
    assert load_drain_states(c, "count-Partition 1", "R1") == {}  # type: ignore[arg-type]
    assert load_drain_states(c, "count-Partition 2", "R1") == {}  # type: ignore[arg-type]


# -- WatermarkStates ---------------------------------------------------------------------------------------


def test_partition_watermark_is_the_minimum_once_every_producer_reported():
    wm = WatermarkStates([S0, S1], EXPECTED)
    assert wm.watermark(S0) == -1
    assert wm.update(S0, "split-Partition 0", 100) is False  # one of two producers: none yet
    assert wm.watermark(S0) == -1
    assert wm.update(S0, "split-Partition 1", 50) is True
    assert wm.watermark(S0) == 50
    assert wm.update(S0, "split-Partition 1", 200) is True  # now the other one holds it back
    assert wm.watermark(S0) == 100
    assert wm.update(S0, "split-Partition 0", 90) is False  # a producer's watermark never goes back
    assert wm.watermark(S0) == 100
    assert wm.update(S0, "split-Partition 0", 150) is True
    assert wm.watermark(S0) == 150
    assert wm.watermark(S1) == -1  # partitions are apart


def test_a_watermark_without_a_task_name_sets_it_directly():
    wm = WatermarkStates([S0, SRC], EXPECTED)
    assert wm.update(S0, None, 70) is True  # the aggregating task's broadcast
    assert wm.watermark(S0) == 70
    assert wm.update(S0, None, 60) is False and wm.watermark(S0) == 70
    assert wm.update(SRC, "someone", 10) is False  # no producers expected: per-task ones never count
    assert wm.watermark(SRC) == -1
    assert wm.update(SRC, None, 30) is True and wm.watermark(SRC) == 30


def test_task_watermark_is_the_minimum_over_its_partitions():
    wm = WatermarkStates([S0, S1], EXPECTED)
    assert wm.task_watermark() == -1
    wm.update(S0, None, 500)
    assert wm.task_watermark() == -1  # S1 has none yet
    wm.update(S1, "split-Partition 0", 300)
    wm.update(S1, "split-Partition 1", 400)
    assert wm.watermark(S1) == 300
    assert wm.task_watermark() == 300
    wm.update(S1, "split-Partition 0", 900)
    assert wm.task_watermark() == 400
    assert WatermarkStates([], {}).task_watermark() == -1


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


FOUR = {"shuffle": 4}


def test_without_an_idle_timeout_a_silent_producer_holds_the_watermark_back():
    clock = Clock()
    wm = WatermarkStates([S0], FOUR, clock=clock)
    for t in range(3):
        wm.update(S0, f"p{t}", 100)
    clock.ms += 3_600_000
    assert wm.update(S0, "p0", 500) is False and wm.watermark(S0) == -1  # p3 never sent one


def test_an_idle_timeout_advances_with_a_quorum_of_producers():
    """WatermarkStates.WatermarkState: after task.watermark.idle.timeout.ms since the start, a quorum
    (int(4 * 0.5) = 2) suffices; later, producers idle for longer than the timeout are left out."""
    clock = Clock()
    wm = WatermarkStates([S0], FOUR, idle_timeout_ms=1000, quorum_pct=0.5, clock=clock)
    assert wm.update(S0, "p0", 100) is False
    assert wm.update(S0, "p1", 200) is False  # a quorum, but the timeout has not passed since the start
    clock.ms += 1000
    assert wm.update(S0, "p1", 300) is True and wm.watermark(S0) == 100  # the minimum of those heard
    clock.ms += 500
    assert wm.update(S0, "p1", 400) is False  # p0 (100) was heard 1.5 s ago, p1 now: one is no quorum
    assert wm.watermark(S0) == 100
    assert wm.update(S0, "p2", 350) is True and wm.watermark(S0) == 350  # p1 and p2 are
    clock.ms += 2000
    assert wm.update(S0, "p0", 50) is False  # a watermark going back is ignored, and is no sign of life
    assert wm.watermark(S0) == 350


def test_the_quorum_percentage_rounds_down():
    clock = Clock()
    wm = WatermarkStates([S0], FOUR, idle_timeout_ms=1000, quorum_pct=0.8, clock=clock)  # int(3.2) = 3
    clock.ms += 1000
    wm.update(S0, "p0", 10)
    assert wm.update(S0, "p1", 20) is False
    assert wm.update(S0, "p2", 30) is True and wm.watermark(S0) == 10
    assert wm.update(S0, "p3", 40) is False  # p0, heard within the timeout, still holds it at 10
    assert wm.update(S0, "p0", 25) is True and wm.watermark(S0) == 20  # all four: their minimum


# -- JobSpec -----------------------------------------------------------------------------------------------


def noop(ctx):
    return None


def page_views() -> JobSpec:
    return JobSpec(
        name="page_views",
        stages=(
            StageSpec("split", noop, inputs=("PageViews",), intermediate_outputs=("pv-by-user",)),
            StageSpec("split-clicks", noop, inputs=("Clicks", "Taps"), intermediate_outputs=("pv-by-user",)),
            StageSpec("count", noop, inputs=("pv-by-user",), outputs=("counts-out",), stores=("counts", "seen")),
        ),
        intermediate={"pv-by-user": 4},
    )


def test_config_holds_the_run_id_intermediate_streams_and_changelogs():
    cfg = page_views().config("1700000000000-abcdef01")
    assert cfg["app.run.id"] == "1700000000000-abcdef01"
    assert cfg["job.name"] == "page_views" and cfg["job.id"] == "1"
    assert cfg["streams.pv-by-user.samza.intermediate"] == "true"
    assert cfg["streams.pv-by-user.samza.physical.name"] == "pv-by-user"
    assert cfg["streams.pv-by-user.samza.system"] == "kafka"
    assert cfg["streams.pv-by-user.partitions"] == "4"
    assert cfg["stores.counts.changelog"] == "kafka.page-views-1-counts-changelog"
    assert cfg["stores.seen.changelog"] == "kafka.page-views-1-seen-changelog"
    assert cfg["task.inputs"] == "kafka.Clicks,kafka.PageViews,kafka.Taps,kafka.pv-by-user"
    assert (cfg["task.commit.ms"], cfg["task.window.ms"], cfg["job.drain-monitor.poll.interval.ms"]) == \
        ("5000", "1000", "1000")
    assert not any(k.startswith("streams.counts-out.") for k in cfg)  # a plain output is not intermediate
    # What drain status reads back from it.
    assert intermediate_streams(cfg) == [("kafka", "pv-by-user")]
    assert all(isinstance(v, str) for v in cfg.values())


def test_producers_are_the_tasks_of_the_stages_writing_the_stream():
    job = page_views()
    partitions = {"PageViews": 3, "Clicks": 5, "Taps": 2, "pv-by-user": 4}
    assert stage_partitions(job.stage("split-clicks"), partitions) == 5
    assert job.producers("pv-by-user", partitions) == 3 + 5
    assert job.producers("counts-out", partitions) == 0
    assert job.producers("PageViews", partitions) == 0
    assert job.is_intermediate("pv-by-user") and not job.is_intermediate("PageViews")
    assert task_name("count", 2) == "count-Partition 2"
    with pytest.raises(KeyError, match="no stage 'nope'"):
        job.stage("nope")


def test_with_config_sets_timings_from_milliseconds():
    job = page_views()
    changed = with_config(job, {"task.commit.ms": "2500", "task.window.ms": "250",
                                "job.drain-monitor.poll.interval.ms": "100", "app.run.id": "R", "x": "y"})
    assert (changed.commit_interval_s, changed.window_interval_s, changed.drain_poll_interval_s) == (2.5, 0.25, 0.1)
    assert (job.commit_interval_s, job.window_interval_s, job.drain_poll_interval_s) == (5.0, 1.0, 1.0)
    assert changed.stages == job.stages and changed.name == job.name
    assert with_config(job, {}) == job
    assert with_config(job, {"task.window.ms": "40"}).commit_interval_s == 5.0
    assert set(TIMINGS) == {"task.commit.ms", "task.window.ms", "job.drain-monitor.poll.interval.ms"}
    # The config a job publishes gives the same timings back.
    assert with_config(job, changed.config("R")) == changed


@pytest.mark.parametrize("key", sorted(TIMINGS))
@pytest.mark.parametrize("value", ["0", "-5", "1.5", "abc", "", "5s"])
def test_with_config_refuses_a_timing_that_is_not_a_positive_integer(key, value):
    with pytest.raises(ValueError):
        with_config(page_views(), {key: value})


def test_with_config_names_the_key_of_a_non_positive_timing():
    with pytest.raises(ValueError, match=r"task\.commit\.ms must be a positive number of milliseconds"):
        with_config(page_views(), {"task.commit.ms": "0"})


def test_published_timings_survive_a_round_trip():
    job = with_config(page_views(), {"task.commit.ms": "1001"})
    assert job.config("R")["task.commit.ms"] == "1001"


def test_the_watermark_rules_come_from_the_jobs_config():
    from statectl.errors import StatectlError
    from statectl.pipeline.control import watermark_rules
    from statectl.pipeline.spec import settable

    assert watermark_rules({}) == {"idle_timeout_ms": -1, "quorum_pct": 0.5}  # TaskConfig's defaults
    assert watermark_rules({"task.watermark.idle.timeout.ms": "3000",
                            "task.watermark.quorum.size,percentage": "0.75"}) == {"idle_timeout_ms": 3000,
                                                                                 "quorum_pct": 0.75}
    # Samza reads the quorum only under its own spelling (with a comma).
    assert watermark_rules({"task.watermark.quorum.size.percentage": "0.9"})["quorum_pct"] == 0.5
    with pytest.raises(StatectlError, match="task.watermark.idle.timeout.ms"):
        watermark_rules({"task.watermark.idle.timeout.ms": "soon"})
    assert settable("task.watermark.idle.timeout.ms") and settable("task.watermark.quorum.size,percentage")
