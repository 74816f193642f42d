"""The labelled findings corpus (benchmarks/findings_corpus.py) and the goals it measures.

The generator is checked for what it promises (msMemScope rows in the writer's order, a
ring-truncated snapshot, the truth worked out from the allocator model), then a small
slice of the corpus is scored as benchmarks/bench_findings_corpus.py scores the whole:
precision and recall >= 0.95 for leaks and OOM causes, bytes per step within 2%, no
medium fragmentation finding where none is due (issue 22).
"""

from __future__ import annotations

import json
import pickle

import pytest

from benchmarks.bench_findings_corpus import goals_met, score_corpus, table, totals
from benchmarks.findings_corpus import (
    Case,
    LeakPlan,
    cases,
    memscope_rows,
    run_case,
    step_churn,
    write_case,
)

MiB = 1 << 20


def test_memscope_rows_are_in_the_writers_order():
    """A block's MALLOC and FREE are written when it is freed; never-freed blocks, HAL
    segments and the buffered SYSTEM rows come last; IDs count events in time order."""
    rows = memscope_rows(run_case(Case("m", "memscope_db", steps=6,
                                       leaks=(LeakPlan(size=MiB),))))
    ids = [r["ID"] for r in rows]
    assert len(set(ids)) == len(ids) and ids != sorted(ids)
    by_time = sorted(rows, key=lambda r: (r["Timestamp(ns)"], r["ID"]))
    assert [r["ID"] for r in by_time] == sorted(ids)  # the counter follows time
    kinds = [(r["Event"], r["Event Type"]) for r in rows]
    last_free = max(i for i, k in enumerate(kinds) if k == ("FREE", "PTA"))
    never_freed = [i for i, r in enumerate(rows) if r["Event"] == "MALLOC"
                   and r["Event Type"] == "PTA" and i > last_free]
    assert len(never_freed) == 4 + 6  # the parameters and one leaked block a step
    assert {r["Attr"]["owner"] for r in (rows[i] for i in never_freed)} == {
        "PTA@model@weight", "PTA@leaks_mem"}
    assert kinds[-1] == ("SYSTEM", "STOP_TRACE")
    assert [r["Name"] for r in rows if r["Event Type"] == "STEP"] == ["1", "2", "3", "4", "5"]


def test_ring_truncated_snapshot_starts_mid_run(tmp_path):
    case = Case("ring", "snapshot", steps=8, ring=0.5, leaks=(LeakPlan(size=MiB),))
    path, truth = write_case(case, tmp_path)
    trace = pickle.loads(path.read_bytes())["device_traces"][0]
    full = write_case(Case("full", "snapshot", steps=8, leaks=(LeakPlan(size=MiB),)),
                      tmp_path)[0]
    whole = pickle.loads(full.read_bytes())["device_traces"][0]
    assert len(trace) == len(whole) - int(len(whole) * 0.5)
    assert trace == whole[len(whole) - len(trace):]
    alive, ghosts = set(), 0  # frees of blocks whose alloc fell out of the ring
    for entry in trace:
        if entry["action"] == "alloc":
            alive.add(entry["addr"])
        elif entry["action"] == "free_completed":
            ghosts += entry["addr"] not in alive
            alive.discard(entry["addr"])
    assert ghosts > 0
    assert json.loads(path.with_name(path.name + ".truth.json").read_text()) == json.loads(
        json.dumps(truth, default=str))


def test_truth_comes_from_the_allocator_model():
    """A leak every 3rd step: bytes per step is a block's held size over 3; the OOM's
    cause is worked out from the model's pool (fragmentation: the request fits the free
    bytes, not the largest gap)."""
    run = run_case(Case("t", "snapshot", steps=9, leaks=(LeakPlan(size=MiB, every=3),),
                        oom="fragmentation"))
    (leak,) = run.truth["leaks"]
    assert (leak["blocks"], leak["bytes_per_step"]) == (3, MiB / 3)
    (oom,) = run.truth["ooms"]
    assert oom["largest_gap_bytes"] < oom["requested_bytes"] \
        <= oom["pool_free_bytes"] + oom["device_free_bytes"]
    assert run.truth["fragmentation_medium"] is True
    assert step_churn() == 340.4375 * MiB


def test_every_format_and_kind_of_truth_is_in_the_corpus():
    corpus = cases()
    assert {c.fmt for c in corpus} == {"snapshot", "memscope_db", "memscope_csv", "profiler"}
    assert any(c.ring for c in corpus) and any(not c.markers for c in corpus)
    assert {c.oom for c in corpus} == {None, "fragmentation", "full"}
    assert len({c.name for c in corpus}) == len(corpus)


def test_profiler_steps_come_from_the_blocks_freed_again(tmp_path):
    """A profiler folder's events are levels only: the step clock is read from its
    operator blocks' allocations and frees (the period of those freed again: a
    once-per-step leak never sets it)."""
    from memtui.analysis.findings.leak import find_leaks
    from memtui.analysis.timeline.steps import find_steps
    from memtui.sources import open_capture

    path, truth = write_case(Case("p", "profiler", steps=12, markers=False,
                                  leaks=(LeakPlan(size=MiB),)), tmp_path)
    trace = open_capture(path)
    (device,) = trace.meta.device_names
    steps = find_steps(trace, device)
    assert steps.count == 12 and not steps.sliced and steps.axis == "t"
    assert steps.source.startswith("the period of the blocks' allocations and frees")
    (leak,) = find_leaks(trace, device, steps)
    assert (leak.detail["owner"], leak.detail["bytes_per_step"]) == ("aten::cat", MiB)


def test_a_missed_beat_of_the_block_clock_is_put_back():
    """A gap twice the median is one step whose clock block came out another size."""
    import numpy as np

    from memtui.analysis.timeline.steps import _fill_missed_beats

    times = np.array([0, 10, 20, 40, 50, 60, 95], dtype=np.int64)
    assert _fill_missed_beats(times).tolist() == [0, 10, 20, 30, 40, 50, 60, 95]
    regular = np.array([0, 10, 20, 30], dtype=np.int64)
    assert _fill_missed_beats(regular).tolist() == [0, 10, 20, 30]
@pytest.fixture(scope="module")
def fast_results(tmp_path_factory):
    return score_corpus(tmp_path_factory.mktemp("corpus"), "fast")


def test_the_fast_slice_keeps_the_goals(fast_results):
    every = totals(fast_results)
    assert every["leak"].tp >= 6 and every["oom"].tp == 2, table(fast_results)
    shapes = {r.shape for r in fast_results}
    assert {"leak_moe_every_2nd_nomarkers", "clean_moe_mix_nomarkers"} <= shapes
    assert goals_met(fast_results) == [], table(fast_results) + "\n" + "\n".join(
        f"{r.case}: {m}" for r in fast_results for m in r.misses)


def test_msmemscope_driver_segments_do_not_beat_the_step_clock(tmp_path):
    """Without markers, an msMemScope DB's HAL rows (the driver segments, many in the first
    step) are not read as pauses of the loop's stacks: 32 steps, not 33 (the corpus's
    leak_every_step_nomarkers: they made its leak 3.1% small)."""
    from memtui.analysis.timeline.steps import find_steps
    from memtui.sources import open_capture

    path, _ = write_case(Case("m", "memscope_db", steps=32, markers=False,
                              leaks=(LeakPlan(size=MiB),)), tmp_path)
    trace = open_capture(path)
    (device,) = trace.meta.device_names
    assert "HAL" in set(trace.device_events(device)["pool"].to_list())
    steps = find_steps(trace, device)
    assert not steps.by_markers and not steps.sliced
    assert steps.count == 32
