"""Steps that are steps (issue 22, points 4 and 5): the clock of a loop without markers is a
recurring stack whose blocks are freed within its period, never the leak itself; a last
step that finished counts; where markers exist, the clock found without them beats as
often as they do.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.generate_memscope import generate_db
from memtui.analysis.findings.leak import find_leaks
from memtui.analysis.timeline.steps import find_steps, rhythm_steps
from memtui.sources import open_capture
from tests.conftest import REPO
from tests.helpers.findings_traces import DEVICE, MiB, TraceBuilder, training_loop

KiB = 1 << 10


def kv_cache_loop(steps: int, markers: bool = False):
    """Each step: a forward burst of 3 allocations, a backward burst of 20 and the
    optimizer's 2, all freed in the step; every second step ``cache_kv_for_debug`` keeps
    256 KiB.  The only stack whose allocations are evenly spaced one by one is the
    leaking one."""
    b = TraceBuilder()
    b.alloc("weights", 64 * MiB)
    for k in range(steps):
        if markers:
            b.step(f"ProfilerStep#{k}")
        forward = [b.alloc("forward", 4 * MiB) for _ in range(3)]
        if k % 2 == 1:
            b.alloc("cache_kv_for_debug", 256 * KiB)
        backward = [b.alloc("backward", MiB) for _ in range(20)]
        for block in forward + backward:
            b.free(block)
        for block in [b.alloc("optimizer", MiB) for _ in range(2)]:
            b.free(block)
    return b.build()


def test_the_leak_is_never_the_clock():
    """Before: "256 KiB per step over 20 steps", steps from cache_kv_for_debug.  Its blocks
    are never freed, so it cannot keep a loop's time: the bursts' first allocations do."""
    trace = kv_cache_loop(40)
    steps = find_steps(trace, DEVICE)
    assert not steps.by_markers and not steps.sliced
    assert steps.count == 40
    (leak,) = find_leaks(trace, DEVICE, steps)
    assert leak.detail["function"] == "cache_kv_for_debug"
    assert "cache_kv_for_debug" not in leak.detail["steps_from"]
    assert leak.detail["bytes_per_step"] == 128 * KiB  # 256 KiB every second step
    assert leak.detail["blocks"] == 20


def test_a_burst_beats_once_per_step():
    """The backward burst of 20 allocations from one stack is one beat a step."""
    index, label, stack = rhythm_steps(kv_cache_loop(12).device_events(DEVICE))
    assert index.size == 12
    assert np.all(np.diff(index) > 0)


def _not_its_own_clock(trace, iterations: int) -> None:
    """The leak never keeps the time: no stack's rhythm (the leak's is the only even
    one); steps, where found, come from the period of what the loop frees again (each
    iteration's temporaries), and the leak is then its true 1 MiB an iteration; else
    equal slices, and no leak claimed per "step"."""
    assert rhythm_steps(trace.device_events(DEVICE)) is None
    steps = find_steps(trace, DEVICE)
    assert steps.anchor_stack is None and not steps.by_markers
    found = find_leaks(trace, DEVICE)
    if steps.sliced:
        assert steps.source == "16 equal slices of the trace (no steps found)"
        assert all("bytes_per_step" not in leak.detail for leak in found)
        return
    assert steps.source.startswith("the period of the allocations and frees")
    assert abs(steps.count - iterations) <= 1
    assert [(f.detail["function"], f.detail["bytes_per_step"]) for f in found] == [
        ("grows", MiB)]


def test_a_stack_that_accumulates_without_markers_gives_no_steps():
    """Only one stack recurs evenly, and it is never freed: it is no clock.  The loop
    around it (two temporaries an iteration) repeats every five events: those are the
    steps, and the leak 1 MiB a step."""
    b = TraceBuilder()
    for _ in range(30):
        b.alloc("grows", MiB)
        b.free(b.alloc("noise", MiB))
        b.free(b.alloc("noise", MiB))
    _not_its_own_clock(b.build(), 30)


@settings(max_examples=10, deadline=None, derandomize=True)
@given(iterations=st.integers(8, 40), fillers=st.integers(8, 16),
       seed=st.integers(0, 2**32 - 1))
def test_a_leak_that_others_keep_time_with_is_not_the_clock(iterations, fillers, seed):
    """The growing stack is the only evenly spaced one, and two freed stacks fall once in
    each of its periods (they would corroborate it as a loop's clock), at shuffled places
    (so neither is even enough to be the clock itself): only the rule that a clock frees
    its blocks keeps the leak from measuring itself."""
    rng = np.random.default_rng(seed)
    b = TraceBuilder()
    for _ in range(iterations):
        b.alloc("grows", MiB)
        order = ["early", "late"] + ["noise"] * fillers
        rng.shuffle(order)
        for name in order:
            b.free(b.alloc(name, MiB))
    trace = b.build()
    _not_its_own_clock(trace, iterations)


@pytest.mark.parametrize("markers", [True, False], ids=["markers", "no-markers"])
def test_a_finished_last_step_counts(markers):
    """The last step's backward and frees came: it finished, and its leaked block counts
    (before: 9 of 10 blocks)."""
    steps = find_steps(training_loop(10, markers=markers), DEVICE)
    assert steps.last_finished
    (leak,) = find_leaks(training_loop(10, markers=markers), DEVICE)
    assert leak.detail["blocks"] == 10


@pytest.mark.parametrize("markers", [True, False], ids=["markers", "no-markers"])
def test_a_last_step_cut_short_does_not_count(markers):
    trace = training_loop(12, leak=MiB, markers=markers, stop_mid_step=True)
    steps = find_steps(trace, DEVICE)
    assert not steps.last_finished
    (leak,) = find_leaks(trace, DEVICE)
    assert leak.detail["blocks"] == 12  # the 13th step, cut short, allocated no leak yet


def _marker_and_rhythm(trace, device):
    marked = find_steps(trace, device)
    assert marked.by_markers
    found = rhythm_steps(trace.device_events(device))
    assert found is not None, "no clock found where markers say there are steps"
    return marked, found[0]


@pytest.mark.parametrize("case", ["loop", "every-third", "kv-cache"])
def test_period_of_the_clock_agrees_with_the_markers(case):
    trace = {"loop": lambda: training_loop(16),
             "every-third": lambda: training_loop(18, every=3),
             "kv-cache": lambda: kv_cache_loop(16, markers=True)}[case]()
    marked, beats = _marker_and_rhythm(trace, DEVICE)
    assert beats.size == marked.count
    # each beat falls in its own marked step
    t = trace.device_events(DEVICE)["t"].to_numpy()
    step_of_beat = np.searchsorted(marked.times, t[beats], side="right") - 1
    assert np.array_equal(step_of_beat, np.arange(marked.count))


def test_period_agrees_with_msmemscope_step_rows(tmp_path):
    trace = open_capture(generate_db(tmp_path / "memscope_dump_20260101000000.db", 20_000,
                                     seed=7, steps=12, leak_bytes=MiB))
    device = trace.meta.device_names[0]
    marked = find_steps(trace, device)
    assert marked.by_markers and marked.count == 12
    # the generator's blocks come from 500 random stacks at random times: no stack beats
    # once per step, so no clock is claimed (rather than a wrong one)
    assert rhythm_steps(trace.device_events(device)) is None


@pytest.mark.parametrize("name,count", [
    ("tests/data/cuda_train_leak.pickle", 8), ("tests/data/cuda_train_settings.pickle", 8),
    ("tests/data/cuda_train_expandable.pickle", 8), ("snapshots/demo_training.pickle", 187)])
def test_period_agrees_with_the_markers_of_a_real_loop(name, count):
    """memtui record's 8-step AdamW loops (tests/data; Optimizer.step markers) and the
    demo (ProfilerStep#N): the clock found without the markers beats as often."""
    trace = open_capture(REPO / name)
    marked, beats = _marker_and_rhythm(trace, "cuda:0")
    assert beats.size == marked.count == count



@pytest.mark.parametrize(("actions", "block", "sizes", "want"), [
    # every row has its block: block 0 allocated and freed counts; block 1, allocated
    # twice and never freed here, does not
    ([1, 1, -1, 1], [0, 1, 0, 1], [10, 5, 10, 5], [10, 10, 0, 0]),
    # a row without a block (-1) never counts, whatever its size; block 1 only freed
    ([1, 1, -1, -1], [0, -1, 0, 1], [10, 5, 10, 7], [10, 10, 0, 0]),
])
def test_the_transient_level_by_hand(actions, block, sizes, want):
    """Only blocks both allocated and freed among the rows move the transient level."""
    from memtui.analysis.timeline.period import _level_of

    got = _level_of(np.array(actions, dtype=np.int8), np.array(block), np.array(sizes))
    assert got.tolist() == want
