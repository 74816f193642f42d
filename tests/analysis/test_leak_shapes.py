"""Leaks in loops shaped as real ones are (issue 33, items 1 and 5).

The loops of :mod:`tests.helpers.loop_shapes`: stacks chosen per allocation by the data,
counts and sizes that vary, micro-batches, evaluations, a jittered clock, with and without
step markers.  A planted leak is found with its bytes per step within 5% (exact where every
occurrence keeps the same block); without steps it is found all the same, per occurrence;
the shapes that are not leaks (a warm-up cache, a KV cache grown and freed each step, an
evaluation cache replaced at each evaluation, a clean loop) give none.  The real captures:
``cuda_moe_leak.pickle`` (tests/data: 128 KiB every 2nd step, with its optimizer markers and
without them) and every real snapshot of ../shared/data (no leak where none was planted).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memtui
from memtui.analysis.findings.leak import find_leaks
from memtui.analysis.timeline.period import run_lows, whole_steps
from memtui.analysis.timeline.steps import find_steps
from memtui.model import empty_frame
from tests.conftest import REPO, shared_files
from tests.helpers.findings_traces import DEVICE, MiB
from tests.helpers.loop_shapes import LEAK_FUNCTION, LoopShape, build_loop
from tests.helpers.run_profile import by_profile

KiB = 1 << 10
#: The issue's loop: 60 activations a step from two stacks the data picks between, 20
#: gradients from a third, one never-freed 3 MiB tensor, nothing else kept.
ISSUE_LOOP = LoopShape(steps=829, experts=2, activations=60, count_jitter=0.0,
                       gradients=20, optimizer_temps=0, temporaries=0.0, size_jitter=0.0,
                       leak=3 * MiB)


def _without_steps(trace):
    """``find_steps``'s answer where nothing recurs: equal slices (the step-free path)."""
    return dataclasses.replace(find_steps(trace, DEVICE), sliced=True)


def test_the_issues_loop_is_found_at_three_mib_per_step():
    """Before: "16 equal slices (no steps found)" and no leak.  Now its 829 steps, and
    3.0 MiB per step exactly."""
    trace = build_loop(ISSUE_LOOP, seed=3)
    steps = find_steps(trace, DEVICE)
    assert not steps.sliced and not steps.by_markers
    assert abs(steps.count - 829) <= 1
    (leak,) = find_leaks(trace, DEVICE, steps)
    assert leak.detail["function"] == LEAK_FUNCTION
    assert leak.detail["bytes_per_step"] == 3 * MiB
    assert "leaks 3.0 MiB per step" in leak.title
    assert leak.severity == "high"


def test_the_issues_loop_leaking_every_second_step():
    shape = dataclasses.replace(ISSUE_LOOP, steps=300, leak=128 * KiB, leak_every=2)
    (leak,) = find_leaks(build_loop(shape, seed=5), DEVICE)
    assert leak.detail["every_steps"] == 2
    assert leak.detail["bytes_per_step"] == 64 * KiB
    assert "leaks 128.0 KiB every 2nd step" in leak.title
    assert leak.detail["bytes_per_occurrence"] == 128 * KiB


def test_without_steps_the_leak_is_said_per_occurrence_and_per_second():
    """The same loop read without a step clock: its 3 MiB occurrences, their count,
    spacing and rate."""
    shape = dataclasses.replace(ISSUE_LOOP, steps=120)
    trace = build_loop(shape, seed=1)
    (leak,) = find_leaks(trace, DEVICE, _without_steps(trace))
    assert "bytes_per_step" not in leak.detail  # no steps, no per-step figure
    assert leak.detail["bytes_per_occurrence"] == 3 * MiB
    assert leak.detail["occurrences"] == 120
    assert leak.detail["regularity"] < 0.5
    first, last = leak.detail["first_t"], leak.detail["last_t"]
    per_second = 119 * 3 * MiB / ((last - first) / 1e9)
    assert leak.detail["bytes_per_second"] == pytest.approx(per_second, rel=0.05)
    assert "leaks 3.0 MiB 120 times" in leak.title and "no steps found" in leak.title


def test_a_leak_without_steps_in_the_text_the_screen_and_check():
    """``findings`` says where its figures come from, the Findings screen draws what it
    kept occurrence by occurrence, and ``check --max-leak-per-step`` reads it per
    occurrence (the nearest a loop without steps has to a step)."""
    from memtui.analysis.limits.check import _leak_limit
    from memtui.text.findings import format_findings
    from memtui.tui.screens.findings import detail_text

    trace = build_loop(dataclasses.replace(ISSUE_LOOP, steps=60), seed=2)
    (leak,) = find_leaks(trace, DEVICE, _without_steps(trace))
    text = format_findings(trace, {DEVICE: [leak]})
    assert "no steps found: the growth of its never-freed blocks; 60 blocks, 180.0 MiB" \
        in text
    assert "60 occurrences of 3.0 MiB" in text
    screen = detail_text(leak, "+0.1 s").plain
    assert "kept at each occurrence: " in screen and "steps from" not in screen
    assert _leak_limit(trace, DEVICE, [leak], 4 * MiB).status == "pass"
    broken = _leak_limit(trace, DEVICE, [leak], 2 * MiB)
    assert (broken.status, broken.figure) == ("fail", 3 * MiB)


SHAPES = st.builds(
    LoopShape,
    steps=st.integers(24, 70), markers=st.booleans(), experts=st.integers(1, 4),
    activations=st.integers(6, 40), count_jitter=st.sampled_from([0.0, 0.2, 0.5]),
    activation_size=st.sampled_from([256 * KiB, MiB, 4 * MiB]),
    size_jitter=st.sampled_from([0.0, 0.3, 0.6]), gradients=st.integers(2, 12),
    micro_batches=st.integers(1, 3), optimizer_temps=st.integers(0, 3),
    eval_every=st.sampled_from([0, 0, 4, 5, 7]), time_jitter=st.sampled_from([0.0, 0.9]),
    leak=st.sampled_from([64 * KiB, 128 * KiB, MiB, 3 * MiB]),
    leak_every=st.integers(1, 3), leak_phase=st.sampled_from(["forward", "end", "random"]),
)
#: 20 loops a property in CI's short profile, 200 in the long one (tests/helpers/run_profile.py)
SLOW = settings(max_examples=by_profile(20, 200), deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
@SLOW
@given(shape=SHAPES, seed=st.integers(0, 1000))
def test_a_planted_leak_is_found_in_any_loop_shape(shape, seed):
    """Bytes per step within 5% of what was planted, with markers or without."""
    found = find_leaks(build_loop(shape, seed), DEVICE)
    assert [f.detail["function"] for f in found] == [LEAK_FUNCTION]
    assert found[0].detail["bytes_per_step"] == pytest.approx(shape.bytes_per_step,
                                                              rel=0.05)


@pytest.mark.slow
@SLOW
@given(shape=SHAPES, seed=st.integers(0, 1000))
def test_a_planted_leak_is_found_without_any_steps(shape, seed):
    """Read with no step clock at all, the leak's occurrences are what it planted."""
    trace = build_loop(dataclasses.replace(shape, markers=False), seed)
    found = find_leaks(trace, DEVICE, _without_steps(trace))
    assert [f.detail["function"] for f in found] == [LEAK_FUNCTION]
    assert found[0].detail["bytes_per_occurrence"] == pytest.approx(shape.leak, rel=0.05)


@pytest.mark.slow
@SLOW
@given(shape=SHAPES, seed=st.integers(0, 1000),
       negative=st.sampled_from(["clean", "warmup", "kv_cache", "eval_cache"]),
       stepless=st.booleans())
def test_what_is_not_a_leak_is_never_one(shape, seed, negative, stepless):
    """A clean loop, a warm-up cache that stops growing, a KV cache grown and freed each
    step, an evaluation cache replaced at each evaluation: no leak, with steps or
    without."""
    shape = dataclasses.replace(
        shape, leak=0, warmup_steps=5 if negative == "warmup" else 0,
        kv_cache=negative == "kv_cache", eval_cache=negative == "eval_cache",
        eval_every=shape.eval_every or (3 if negative == "eval_cache" else 0))
    trace = build_loop(shape, seed)
    steps = _without_steps(trace) if stepless else find_steps(trace, DEVICE)
    assert find_leaks(trace, DEVICE, steps) == []


def test_micro_batches_are_not_steps():
    """Two micro-batches a step: the gradients the first allocates stay until the step's
    end, so the troughs between micro-batches lie higher; the steps are the loop's."""
    shape = LoopShape(steps=40, micro_batches=2, optimizer_temps=0, leak=MiB)
    trace = build_loop(shape, seed=2)
    steps = find_steps(trace, DEVICE)
    assert abs(steps.count - 40) <= 1
    (leak,) = find_leaks(trace, DEVICE, steps)
    assert leak.detail["bytes_per_step"] == MiB


def test_an_evaluation_every_fifth_step_is_not_the_clock():
    """The evaluation recurs every five steps, more strongly than the step itself: the
    shortest period whose troughs all reach the floor is the step."""
    shape = LoopShape(steps=50, eval_every=5, optimizer_temps=0, leak=MiB)
    trace = build_loop(shape, seed=4)
    steps = find_steps(trace, DEVICE)
    assert abs(steps.count - 50) <= 1
    assert find_leaks(trace, DEVICE, steps)[0].detail["bytes_per_step"] == MiB


def test_the_floor_of_each_run_is_its_lowest_point():
    x = np.array([5, 1, 0, 0, 3, 9, 9, 2, 1, 4], dtype=np.float64)
    assert run_lows(x, x <= 2).tolist() == [2, 8]
    assert run_lows(x, x > 100).tolist() == []


def test_troughs_in_two_levels_alternating_are_micro_batches():
    """Lower troughs (0) each followed by one upper (6, the gradients kept): steps end at
    the lower ones; troughs that differ at random stay."""
    ends = np.arange(0, 200, 10)
    x = np.full(200, 50.0)
    x[ends] = np.where(np.arange(ends.size) % 2 == 0, 0.0, 6.0)
    assert whole_steps(x, ends).tolist() == ends[::2].tolist()
    rng = np.random.default_rng(0)
    x[ends] = rng.choice([0.0, 6.0], ends.size)
    x[ends[:3]] = [0.0, 0.0, 6.0]
    assert whole_steps(x, ends).tolist() == ends.tolist()


# -- real captures ----------------------------------------------------------------------------

MOE = REPO / "tests" / "data" / "cuda_moe_leak.pickle"


@pytest.mark.parametrize("markers", [True, False], ids=["markers", "markers-stripped"])
def test_the_real_moe_loop_leaks_128_kib_every_second_step(markers):
    """tests/data/cuda_moe_leak.pickle (its recipe: keep_for_later, moe_leak.py:55, 128 KiB
    every second of 80 steps): with its Optimizer.step markers, and built again without
    them, the data-dependent loop's own period gives the same answer."""
    trace = memtui.open(MOE, use_cache=False).view()
    if not markers:
        trace = dataclasses.replace(trace, markers=empty_frame("markers"))
    steps = find_steps(trace, "cuda:0")
    assert steps.by_markers == markers and not steps.sliced
    assert abs(steps.count - 80) <= 1
    (leak,) = find_leaks(trace, "cuda:0", steps)
    assert leak.detail["function"] == "keep_for_later" and leak.detail["line"] == 55
    assert leak.detail["bytes_per_step"] == 64 * KiB
    assert leak.detail["every_steps"] == 2
    assert "leaks 128.0 KiB every 2nd step" in leak.title
    assert leak.detail["blocks"] in (39, 40)
    assert leak.severity == "high"


def test_the_real_moe_loop_without_any_steps():
    trace = memtui.open(MOE, use_cache=False).view()
    (leak,) = find_leaks(trace, "cuda:0", _without_steps_on(trace, "cuda:0"))
    assert leak.detail["function"] == "keep_for_later"
    assert leak.detail["bytes_per_occurrence"] == 128 * KiB
    assert leak.detail["occurrences"] == 40


def _without_steps_on(trace, device):
    return dataclasses.replace(find_steps(trace, device), sliced=True)


#: What each real snapshot of ../shared/data/torch_snapshots is (SOURCES.md, read by hand)
#: and so what is right: none of them plants a leak.  A one-step capture keeps its
#: gradients and optimizer state (t26_cs336_kk_ctx512_fullstep, t26_nothanmin,
#: t26_bcrafton: grown through a backward or one optimizer step, not through the trace), a
#: forward pass keeps its activations (t26_cs336_kk_ctx128_forward,
#: t26_silmont_forward_bf16_128), the rest hold no loop long enough to tell.
REAL_SNAPSHOTS = [*shared_files("torch_snapshots", "*.pickle"),
                  *shared_files("torch_snapshots", "*.pkl")]


@pytest.mark.parametrize("path", REAL_SNAPSHOTS, ids=lambda p: p.name)
def test_no_leak_on_real_snapshots_that_plant_none(path):
    trace = memtui.open(path, use_cache=False).view()
    for device in trace.meta.device_names:
        steps = find_steps(trace, device)
        assert find_leaks(trace, device, steps) == []
        if steps is not None:  # nor read without steps
            stepless = dataclasses.replace(steps, sliced=True)
            assert find_leaks(trace, device, stepless) == []


@pytest.mark.parametrize("name", ["cuda_train_leak", "cuda_train_settings",
                                  "cuda_train_expandable", "cuda_moe_leak"])
def test_planted_leaks_of_real_captures_are_found_without_steps(name):
    trace = memtui.open(REPO / "tests" / "data" / f"{name}.pickle", use_cache=False).view()
    (leak,) = find_leaks(trace, "cuda:0", _without_steps_on(trace, "cuda:0"))
    assert leak.detail["function"] in ("remember_for_debugging", "keep_for_later")
