"""The savings findings' figures on the three real roles captures (tests/data/cuda_roles_*,
recorded on an H100 by tests/data/cuda_recipes/roles.py), against what the recipe knows:
its float32 model's parameter bytes, its AdamW state bytes, whether it keeps gradients
alive between steps (``*.truth.json``).  Each figure is the module docstring's rule applied
to those bytes, worked out here from the truth, not from memtui's answer."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

from memtui.analysis.findings.savings import find_savings
from memtui.analysis.roles import by_role_at
from memtui.analysis.timeline.at_time import Timeline
from memtui.sources import open_capture

DATA = Path(__file__).resolve().parents[1] / "data"
MODES = ("adamw", "handopt", "late")


@pytest.fixture(scope="module", params=MODES)
def capture(request):
    mode = request.param
    trace = open_capture(DATA / f"cuda_roles_{mode}.pickle")
    truth = json.loads((DATA / f"cuda_roles_{mode}.truth.json").read_text())
    device = trace.meta.device_names[0]
    return trace, device, truth, {_change(f.detail): f for f in find_savings(trace, device)}


def _change(detail: dict) -> str:
    for key, change in (("saving_over_ranks", "sharding"), ("float32_bytes", "bf16"),
                        ("gradient_bytes_into_forward", "gradients"),
                        ("scaled_bytes", "micro_batch")):
        if key in detail:
            return change
    return "checkpointing"


def test_sharding_saves_n_minus_one_nths_of_the_adam_state(capture):
    _, _, truth, found = capture
    state = truth["optimizer_state_bytes"]
    detail = found["sharding"].detail
    assert detail["role_bytes"] == state
    assert detail["saving_over_ranks"] == {"2": state // 2, "4": state * 3 // 4,
                                           "8": state * 7 // 8}
    assert found["sharding"].bytes == state * 7 // 8
    assert detail["saving_8bit_bytes"] == state * 3 // 4  # float32 state in 8 bits


def test_bf16_halves_the_float32_parameters_and_gradients(capture):
    _, _, truth, found = capture
    detail = found["bf16"].detail
    weights = truth["parameter_bytes"]  # a float32 model: each gradient a parameter's size
    assert detail["dtype_confidence"] == "likely"  # nothing casts to half precision
    assert detail["float32_bytes"]["parameter"] == weights
    assert detail["float32_bytes"]["gradient"] == weights
    assert found["bf16"].bytes == sum(detail["float32_bytes"].values()) // 2


def test_gradients_into_the_forward_only_where_the_recipe_keeps_them(capture):
    _, _, truth, found = capture
    if not truth["gradients_kept_between_steps"]:
        assert "gradients" not in found
        return
    detail = found["gradients"].detail
    assert detail["gradient_bytes_into_forward"] == truth["parameter_bytes"]


def test_micro_batch_halves_activations_and_inputs_at_the_peak(capture):
    trace, device, _, found = capture
    timeline = Timeline.build(trace, device)
    roles = by_role_at(trace, device, timeline.peak_event)
    if roles.get("activation", 0) <= 0:
        assert "micro_batch" not in found and "checkpointing" not in found
        return
    scaled = roles["activation"] + roles.get("input", 0)
    assert found["micro_batch"].detail["scaled_bytes"] == scaled
    assert found["micro_batch"].bytes == scaled // 2
    assert found["checkpointing"].bytes == roles["activation"]


@pytest.mark.parametrize(("frame", "left"), [
    (("/venv/torch/nn/modules/module.py", "half"), {"activation"}),  # model.half()
    (("/venv/torch/amp/autocast_mode.py", "__enter__"), {"parameter", "gradient"}),
])
def test_half_precision_seen_in_the_stacks_narrows_bf16(frame, left):
    """A module cast by ``half()`` has 16-bit parameters and gradients already: bf16 can
    only still halve the activations; under autocast the activations are 16-bit: only the
    parameters and gradients are left.  Either way the dtype is only ``possible``."""
    trace = open_capture(DATA / "cuda_roles_handopt.pickle")
    frames = trace.frames
    seen = pl.DataFrame({"frame_id": [int(frames["frame_id"].max()) + 1],
                         "filename": [frame[0]], "line": [1], "name": [frame[1]]},
                        schema=frames.schema)
    trace = replace(trace, frames=pl.concat([frames, seen]))
    device = trace.meta.device_names[0]
    (bf16,) = [f for f in find_savings(trace, device) if "float32_bytes" in f.detail]
    assert set(bf16.detail["float32_bytes"]) == left
    assert bf16.detail["dtype_confidence"] == "possible"
