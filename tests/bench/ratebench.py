"""The "rate" figure of tests/bench/run.py: ``statectl backup --limit-rate 20MiB/s`` of a 256 MiB store (its
own, whatever --size-gib says) into a fresh bucket of the SeaweedFS server, each run a whole process, against
the ideal: the bytes uploaded / 20 MiB/s (12.8 s for 256 MiB). Target: within 10 % of it. The process's wall
time includes its start, the checkpoint and the commit; the engine's own ``duration_s`` is shown beside it, and
the same backup without a limit, interleaved with it: what the host can do at all while the figure is taken
(on a loaded machine, less than the rate)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tests.bench.measure import BenchError, Sample, stat, summarize

if TYPE_CHECKING:
    from tests.bench.run import Bench

MiB = 1024 ** 2
RATE = 20 * MiB
RATE_FLAG = "20MiB/s"
STORE_BYTES = 256 * MiB
TOLERANCE = 0.10


def figure_rate(bench: "Bench") -> dict[str, Any]:
    from tests.bench.run import STORE, VALUE_SIZE, Variant, drop_tree, human, log

    s = bench.s
    store = s.work / "rate-state" / STORE / "Partition_0"
    log(f"rate: generating a {human(STORE_BYTES)} store, then backup --limit-rate {RATE_FLAG}")
    # A key takes its value, its 16-byte key and about 7 bytes of framing in an SST: 256 MiB uploaded.
    bench.gen_store(store, STORE_BYTES // (VALUE_SIZE + 23))
    made: list[str] = []

    def cmd(*extra: str):
        def prepare(run: int) -> list[str]:
            for old in made:
                bench.drop_bucket(old)
            made[:] = [bench.bucket("rate")]
            return bench.sc_backup(store, made[0], *extra)

        return prepare

    def after(run: int, sample: Sample) -> None:
        if sample.returncode != 0:
            raise BenchError(f"backup --limit-rate failed: {sample.stderr[-2000:]}")
        j = json.loads(sample.stdout)
        sample.extra.update(bytes_uploaded=j["bytes_uploaded"], engine_s=j["duration_s"])

    v = Variant("statectl_limited", cmd("--limit-rate", RATE_FLAG), after)
    free = Variant("statectl_unlimited", cmd(), after)
    bench.rounds("rate", [v, free], runs=min(s.runs, 3))
    for b in made:
        bench.drop_bucket(b)
    drop_tree(store.parent.parent)
    uploaded = v.samples[-1].extra["bytes_uploaded"]
    out = {**summarize(v.samples), "rate": RATE, "bytes_uploaded": uploaded, "ideal_s": round(uploaded / RATE, 3),
           "engine_s": stat([x.extra["engine_s"] for x in v.samples]).to_json(),
           "unlimited": {**summarize(free.samples),
                         "engine_s": stat([x.extra["engine_s"] for x in free.samples]).to_json()}}
    log(f"rate: {human(uploaded)} at {RATE_FLAG}: {out['wall_s']['median']:.2f} s (ideal {out['ideal_s']:.2f} s)")
    return out


def figure_row(res: dict[str, Any]) -> dict[str, Any]:
    """The row of run.figures: the median wall time against the ideal, OK within TOLERANCE of it."""
    wall, ideal = res["wall_s"]["median"], res["ideal_s"]
    return {"value": wall, "ideal": ideal, "ratio": wall / ideal, "ok": abs(wall - ideal) <= TOLERANCE * ideal}


def report_lines(res: dict[str, Any]) -> list[str]:
    from tests.bench.run import human

    w, e = res["wall_s"], res["engine_s"]
    u = res["unlimited"]
    row = figure_row(res)
    return [f"backup --limit-rate {RATE_FLAG} of {human(res['bytes_uploaded'])} (whole process, median of {w['n']}): "
            f"{w['median']:.2f} s [{w['min']:.2f}-{w['max']:.2f}], engine {e['median']:.2f} s; ideal "
            f"{res['ideal_s']:.2f} s, {row['ratio']:.3f}x ({'within' if row['ok'] else 'OUTSIDE'} "
            f"{TOLERANCE:.0%}); the same without a limit: {u['wall_s']['median']:.2f} s, engine "
            f"{u['engine_s']['median']:.2f} s"]
