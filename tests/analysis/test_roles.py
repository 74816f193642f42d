"""Memory by role (issue 32): every block's role, the bytes by role at every event.

Checked against the truth the recipes wrote beside the H100 captures (``roles.py``'s
AdamW, late history and hand-written Adam; ``roles_more.py``'s activation checkpointing
with accumulation and SGD momentum under bf16 autocast with C++ stacks: every role within
5% at the peak, the last event and the end of the last step), against the sizes of the
models the train recipe builds, against hand-made training loops of random shapes whose
every byte's role is known (hypothesis: model sizes, 0-3 optimizer-state tensors per
parameter, hand-written optimizers, gradient accumulation, gradients kept, activation
checkpointing, evaluation passes, history started late, C++ stacks), and on every capture
of ../shared/data, tests/data and snapshots/: the roles add up to allocated at every
event.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtui.analysis.roles import (
    ROLES,
    RULES,
    block_roles,
    by_role_at,
    levels_by_role,
)
from memtui.analysis.timeline.at_time import Timeline
from memtui.analysis.timeline.attribution import _levels_per_position
from memtui.loading import load_trace
from memtui.sources.torch_snapshot import load
from tests.conftest import REPO, shared_files
from tests.helpers.role_truth import last_step_end, load_truth, truth_at, within
from tests.helpers.run_profile import by_profile
from tests.helpers.training_snapshots import Loop, training_snapshot

DATA = REPO / "tests" / "data"
ROLE_CAPTURES = sorted(DATA.glob("cuda_roles_*.pickle"))
#: Where the truth names no bytes of a role, mine may hold this many (the 4-byte loss
#: that outlives the backward).
SLACK = 1024


def _device(trace) -> str:
    return trace.meta.device_names[0]


@pytest.mark.parametrize("path", ROLE_CAPTURES, ids=lambda p: p.stem)
def test_roles_match_the_recipe_truth(path: Path):
    """At the peak, the last event and the end of the last step every role the truth names
    is within 5% of it, and no role the truth names is made up where it names none."""
    truth = load_truth(path)
    trace = load(path)
    device = _device(trace)
    timeline = Timeline.build(trace, device)
    moments = {"peak": timeline.peak_event, "last": timeline.positions - 1,
               "last step end": last_step_end(trace, device, truth)}
    for name, event in moments.items():
        mine = by_role_at(trace, device, event)
        want = truth_at(trace, device, truth, event)
        judged = ("parameter", "optimizer_state", "gradient", "input", "activation")
        if not truth["activation"]:  # roles_more.py names no saved tensors
            judged = judged[:-1]
        for role in judged:
            if want.get(role):
                assert within(mine[role], want[role]), (name, role, mine, want)
            else:
                assert mine[role] <= SLACK, (name, role, mine, want)
    # the model and its optimizer, whole, while the loop runs
    end = by_role_at(trace, device, moments["last step end"])
    assert end["parameter"] == truth["parameter_bytes"]
    assert end["optimizer_state"] == truth["optimizer_state_bytes"]


def test_late_history_pairs_the_ghosts():
    """History started after two steps: the parameters and the optimizer state are ghosts,
    named by pairing with the gradients the trace shows, and said to be inferred."""
    trace = load(DATA / "cuda_roles_late.pickle")
    frame = block_roles(trace, "cuda:0").frame.join(
        trace.blocks.select("block_id", "ghost"), on="block_id")
    paired = frame.filter(frame["ghost"] & frame["role"].is_in(["parameter",
                                                                 "optimizer_state"]))
    assert paired.height == 8 + 16
    assert paired["inferred"].all()
    assert set(paired["rule"].cast(str)) == {"paired_parameter", "paired_state"}


def test_train_recipe_sizes():
    """The train recipe's MLP (Linear(1024, 4096), Linear(4096, 1024), float32) under
    AdamW: at the peak (the optimizer's step) its parameters, as many bytes of gradients,
    twice as many of optimizer state, and the 512 x 1024 batch."""
    params = (1024 * 4096 + 4096 + 4096 * 1024 + 1024) * 4
    for name in ("cuda_train_leak", "cuda_train_all_stacks", "cuda_train_settings",
                 "cuda_train_expandable"):
        trace = load(DATA / f"{name}.pickle")
        timeline = Timeline.build(trace, "cuda:0")
        peak = by_role_at(trace, "cuda:0", timeline.peak_event)
        assert within(peak["parameter"], params, 0.01), (name, peak)
        assert within(peak["gradient"], params, 0.01), (name, peak)
        assert within(peak["optimizer_state"], 2 * params, 0.01), (name, peak)
        assert peak["input"] == 512 * 1024 * 4, (name, peak)


def test_every_rule_is_written_down():
    """Each rule id the assignment gives is in RULES with its role and evidence."""
    for path in ROLE_CAPTURES:
        trace = load(path)
        used = set(block_roles(trace, "cuda:0").frame["rule"].cast(str))
        assert used <= set(RULES)
        for rule in used:
            assert RULES[rule].evidence


# -- hand-made loops of random shapes ------------------------------------------------------

_SIZES = st.integers(1, 4096).map(lambda k: k * 512)


def _check_loop(loop: Loop, tmp: Path) -> None:
    snap = training_snapshot(loop, tmp / "loop.pickle")
    trace = load(snap.path)
    device = _device(trace)
    levels = levels_by_role(trace, device)
    positions = np.arange(trace.device_events(device).height)
    assert positions.size == snap.entries
    for role in ROLES:
        mine = levels.at_positions(role, positions)
        want = snap.truth[role]
        off = np.flatnonzero(np.abs(mine - want) > 0.05 * want)
        assert off.size == 0, (loop, role, int(off[0]), int(want[off[0]]), int(mine[off[0]]))


@settings(max_examples=by_profile(30, 300), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(params=st.lists(_SIZES, min_size=1, max_size=6),
       activations=st.lists(_SIZES, min_size=1, max_size=5), states=st.integers(0, 3),
       hand=st.booleans(), user_init=st.booleans(), accumulation=st.integers(1, 3),
       set_to_none=st.booleans(), checkpointing=st.booleans(), steps=st.integers(2, 5),
       late=st.integers(0, 2), cpp=st.booleans(), eval_every=st.integers(0, 3),
       batch=_SIZES)
def test_random_loops(tmp_path_factory, params, activations, states, hand, user_init,
                      accumulation, set_to_none, checkpointing, steps, late, cpp,
                      eval_every, batch):
    """Every role of a hand-made loop within 5% of its truth at every event.  History
    started late is drawn with gradients freed between steps: with gradients kept too,
    parameters, gradients and state are all ghosts of the same sizes, and nothing in the
    trace tells them apart (they stay ``other``)."""
    late = min(late, steps - 1)
    loop = Loop(tuple(params), tuple(activations), states, hand, user_init, accumulation,
                set_to_none or late > 0, checkpointing, steps, late, cpp, eval_every, batch)
    _check_loop(loop, tmp_path_factory.mktemp("loop"))


def test_worked_loop_by_hand(tmp_path: Path):
    """The default loop, its figures worked out: two parameters (1 MiB and 4 KiB) under
    Adam (two states each), at the end of the last step."""
    snap = training_snapshot(Loop(), tmp_path / "loop.pickle")
    trace = load(snap.path)
    last = by_role_at(trace, "cuda:0", snap.entries - 1)
    assert last["parameter"] == (1 << 20) + 4096
    assert last["optimizer_state"] == 2 * ((1 << 20) + 4096)
    assert last["gradient"] == 0  # zero_grad(set_to_none=True)
    assert last["cache"] == 2 * (1 << 22)  # cuBLAS's workspaces, forward and backward
    assert sum(last.values()) == snap.truth["parameter"][-1] + snap.truth["optimizer_state"][
        -1] + snap.truth["cache"][-1]


# -- the sweep: every capture, every event ---------------------------------------------------

def _every_capture() -> list[Path]:
    found = [p for folder in ("torch_snapshots", "msmemscope", "profiler")
             for p in shared_files(folder) if not p.name.endswith((".json", "-shm", "-wal"))]
    found += sorted(DATA.glob("*.pickle")) + sorted((REPO / "snapshots").glob("*.pickle"))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("path", _every_capture(), ids=lambda p: p.name)
def test_roles_add_up_to_allocated_at_every_event(path: Path):
    """On every capture the roles add up to the allocated level after every event, every
    role is 0 or more, and every block has one role."""
    from memtui.analysis.timeline.layers import has_layers, layer_view

    trace = load_trace(path, use_cache=False)
    if has_layers(trace):
        trace = layer_view(trace)
    for device in trace.meta.device_names:
        timeline = Timeline.build(trace, device)
        levels = levels_by_role(trace, device)
        positions = np.arange(timeline.positions)
        parts = [levels.at_positions(role, positions) for role in ROLES]
        assert all((part >= 0).all() for part in parts), device
        np.testing.assert_array_equal(sum(parts), _levels_per_position(timeline),
                                      err_msg=f"{path.name} {device}")
        frame = block_roles(trace, device).frame
        assert frame.height == trace.device_blocks(device).height
        assert frame["role"].null_count() == 0
