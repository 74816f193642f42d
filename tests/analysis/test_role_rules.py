"""The rules of memory by role one at a time, on tiny captures whose answer is known by hand.

The user's rules (``[tool.memtui.roles]``, read defensively), ``user_metadata`` naming a
role, torch.compile regions, msMemScope's owner tags and operator launches, an Ascend
profiler folder's operators and the level no operator explains, a capture with no phases.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from memtui.analysis.roles import (
    block_roles,
    by_role_at,
    levels_by_role,
    parse_rules,
    with_rules,
)
from memtui.analysis.roles.operators import name_kinds
from memtui.analysis.roles.stack_rules import BACKWARD, FORWARD, NEUTRAL, OPTIMIZER
from memtui.analysis.timeline.at_time import Timeline
from memtui.sources.memscope import load as load_memscope
from memtui.sources.torch_snapshot import load
from memtui.text.roles import roles_text
from tests.helpers.memscope_files import mem, row, write_db
from tests.helpers.training_snapshots import Loop, training_snapshot

# -- the user's rules ---------------------------------------------------------------------


@pytest.mark.parametrize(("table", "says"), [
    ("parameter", "must be a table"),
    ({"weights": "x"}, "'weights' is not a role"),
    ({"cache": 3}, "cache must be a regular expression or a list"),
    ({"cache": ["ok", 3]}, "cache must be a regular expression or a list"),
    ({"cache": "("}, "'(' is not a regular expression"),
    ({"cache": "x" * 1001}, "longer than 1000 characters"),
    ({"cache": ["x"] * 201}, "more than 200 expressions"),
])
def test_bad_rules_are_one_clear_line(table, says):
    with pytest.raises(ValueError, match="roles") as caught:
        parse_rules(table, "pyproject.toml [tool.memtui.roles]")
    assert says in str(caught.value)
    assert "\n" not in str(caught.value)


def test_user_rules_come_first(tmp_path: Path):
    """A rule naming the batch's frame makes the inputs a cache; the first matching role
    in the table's order wins; the rest keep memtui's roles."""
    snap = training_snapshot(Loop(), tmp_path / "loop.pickle")
    trace = load(snap.path)
    before = by_role_at(trace, "cuda:0", snap.entries // 2)
    ruled = with_rules(trace, parse_rules({"cache": r"get_batch \(/src/train\.py:30\)",
                                           "input": "get_batch"}))
    frame = block_roles(ruled, "cuda:0").frame
    batches = frame.filter(frame["rule"] == "user")
    assert batches.height == 6 and set(batches["role"].cast(str)) == {"cache"}
    after = by_role_at(ruled, "cuda:0", snap.entries // 2)
    assert after["input"] == 0 and after["cache"] == before["cache"] + before["input"]
    assert sum(after.values()) == sum(before.values())
    assert block_roles(trace, "cuda:0").frame["rule"].cast(str).to_list().count("user") == 0


# -- what the capture names ----------------------------------------------------------------

def _entry(action, addr, size, t, frames=(), **extra) -> dict:
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
            "frames": list(frames), **extra}


def _write(path: Path, trace: list[dict]) -> Path:
    """A snapshot of ``trace`` whose blocks are all freed (an empty final state)."""
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [trace]}))
    return path


MAIN = [{"name": "main", "filename": "/src/run.py", "line": 5}]


def test_user_metadata_names_the_role(tmp_path: Path):
    """``_set_memory_metadata("optimizer state")`` around an allocation names its role,
    whatever else the capture shows; metadata naming no role changes nothing."""
    path = _write(tmp_path / "meta.pickle", [
        _entry("alloc", 0x1000, 512, 1, MAIN, user_metadata="optimizer state"),
        _entry("alloc", 0x2000, 512, 2, MAIN, user_metadata="KV cache"),
        _entry("alloc", 0x3000, 512, 3, MAIN, user_metadata="epoch 3"),
        _entry("free_requested", 0x1000, 512, 4), _entry("free_completed", 0x1000, 512, 5),
        _entry("free_requested", 0x2000, 512, 6), _entry("free_completed", 0x2000, 512, 7),
        _entry("free_requested", 0x3000, 512, 8), _entry("free_completed", 0x3000, 512, 9),
    ])
    trace = load(path)
    frame = block_roles(trace, "cuda:0").frame.sort("block_id")
    assert frame["role"].cast(str).to_list() == ["optimizer_state", "cache", "other"]
    assert frame["rule"].cast(str).to_list()[:2] == ["metadata", "metadata"]


def test_compile_context_is_a_forward(tmp_path: Path):
    """Inside a torch.compile region with nothing else on the stack the allocation is a
    forward's (or a backward's where the region says so): what the forward keeps into
    the backward is an activation, what the backward leaves is a gradient."""
    region, back = "Torch-Compiled Region: 0/0", "CompiledFunctionBackward: 0/0"
    path = _write(tmp_path / "compiled.pickle", [
        _entry("alloc", 0x1000, 1024, 1, MAIN, compile_context=region),  # saved
        _entry("alloc", 0x2000, 512, 2, MAIN, compile_context=region),  # scratch
        _entry("free_requested", 0x2000, 512, 3), _entry("free_completed", 0x2000, 512, 4),
        _entry("alloc", 0x3000, 2048, 5, MAIN, compile_context=back),  # the .grad
        _entry("free_requested", 0x1000, 1024, 6), _entry("free_completed", 0x1000, 1024, 7),
        _entry("alloc", 0x4000, 512, 8, MAIN),  # after the backward: the optimizer's scratch
        _entry("free_requested", 0x4000, 512, 9), _entry("free_completed", 0x4000, 512, 10),
        _entry("free_requested", 0x3000, 2048, 11), _entry("free_completed", 0x3000, 2048, 12),
    ])
    trace = load(path)
    frame = block_roles(trace, "cuda:0").frame.sort("block_id")
    assert frame["role"].cast(str).to_list() == ["activation", "temporary", "gradient",
                                                 "temporary"]


def test_no_phases_is_other_said_so(tmp_path: Path):
    """A capture without stacks shows no phase: its blocks are other (no_phases)."""
    path = _write(tmp_path / "bare.pickle", [
        _entry("alloc", 0x1000, 512, 1), _entry("alloc", 0x2000, 512, 2),
        _entry("free_requested", 0x1000, 512, 3), _entry("free_completed", 0x1000, 512, 4),
        _entry("free_requested", 0x2000, 512, 5), _entry("free_completed", 0x2000, 512, 6),
    ])
    trace = load(path)
    roles = block_roles(trace, "cuda:0")
    assert roles.phases is None
    assert set(roles.frame["rule"].cast(str)) == {"no_phases"}


# -- msMemScope ------------------------------------------------------------------------------

def test_memscope_owner_tags_and_operators(tmp_path: Path):
    """Owner tags name weights, gradients and optimizer state; the operator launched when
    an untagged block was made gives its phase: a forward operator's output alive into a
    backward operator is an activation, a backward operator's scratch a temporary."""
    rows = [
        row(1, "SYSTEM", "START_TRACE", 100, dev="N/A"),
        row(2, "OP_LAUNCH", "ATEN_START", 1000, name="torch._ops.aten.addmm.default"),
        row(3, "OP_LAUNCH", "ATEN_END", 1100, name="torch._ops.aten.addmm.default"),
        row(4, "OP_LAUNCH", "ATEN_START", 2000, name="torch._ops.aten.mm.default"),
        row(5, "OP_LAUNCH", "ATEN_END", 2100, name="torch._ops.aten.mm.default"),
        row(6, "OP_LAUNCH", "ATEN_START", 3000,
            name="torch._ops.aten.threshold_backward.default"),
        row(7, "OP_LAUNCH", "ATEN_END", 3100, name="torch._ops.aten.threshold_backward.default"),
        mem(10, "MALLOC", "PTA", 500, 1, 0x10000, 4096, total=1 << 20, used=4096,
            owner="PTA@model@weight"),
        mem(11, "MALLOC", "PTA", 600, 2, 0x20000, 4096, total=1 << 20, used=8192,
            owner="PTA@model@optimizer_state"),
        mem(12, "MALLOC", "PTA", 1050, 3, 0x30000, 2048, total=1 << 20, used=10240),
        mem(13, "MALLOC", "PTA", 2050, 4, 0x40000, 1024, total=1 << 20, used=11264),
        mem(14, "FREE", "PTA", 2060, 4, 0x40000, 1024, total=1 << 20, used=10240),
        mem(15, "MALLOC", "PTA", 3050, 5, 0x50000, 512, total=1 << 20, used=10752),
        mem(16, "FREE", "PTA", 3060, 5, 0x50000, 512, total=1 << 20, used=10240),
        mem(17, "FREE", "PTA", 3070, 3, 0x30000, 2048, total=1 << 20, used=8192),
        mem(18, "MALLOC", "PTA", 3080, 6, 0x60000, 4096, total=1 << 20, used=12288,
            owner="PTA@model@gradient"),
        row(30, "SYSTEM", "STOP_TRACE", 4000, dev="N/A"),
    ]
    trace = load_memscope(write_db(tmp_path / "memscope_dump_1.db", rows))
    frame = block_roles(trace, "npu:0").frame.join(
        trace.device_blocks("npu:0").select("block_id", "addr"), on="block_id")
    roles = dict(zip(frame["addr"].to_list(), frame["role"].cast(str).to_list(), strict=True))
    assert roles == {0x10000: "parameter", 0x20000: "optimizer_state", 0x30000: "activation",
                     0x40000: "temporary", 0x50000: "temporary", 0x60000: "gradient"}
    assert block_roles(trace, "npu:0").phases == "operator names"


@pytest.mark.parametrize(("name", "kind"), [
    ("aten::convolution_backward", BACKWARD), ("npu::npu_fusion_attention_grad", BACKWARD),
    ("ReluGrad", BACKWARD), ("Conv2DBackpropInput", BACKWARD),
    ("aten::_foreach_add", OPTIMIZER), ("aten::_fused_adamw_", OPTIMIZER),
    ("ApplyAdamW", OPTIMIZER), ("hcom_allReduce__305_45_1", NEUTRAL),
    ("aten::mm", FORWARD), ("cann::trans_TransData_24", FORWARD), ("aten::upgrade", FORWARD),
])
def test_operator_names(name, kind):
    import polars as pl

    assert name_kinds(pl.Series([name])).tolist() == [kind]


# -- the profiler: the level no operator explains ----------------------------------------------

def test_profiler_rest_is_other(tmp_path: Path):
    """Operator rows explain part of memory_record's level; the rest (parameters and
    optimizer state alive before the profile, not told apart) is other, so the roles sum
    to the level at every event."""
    from tests.helpers.toy_traces import profiler_trace

    trace = profiler_trace()
    device = trace.meta.device_names[0]
    timeline = Timeline.build(trace, device)
    for event in range(timeline.positions):
        roles = by_role_at(trace, device, event)
        assert sum(roles.values()) == timeline.levels_at_event(event).allocated
        assert min(roles.values()) >= 0
    assert np.any([by_role_at(trace, device, e)["other"] > 0
                   for e in range(timeline.positions)])
    # no operator rows at all: the whole level (10, 30, 20 bytes) is outside any row
    levels = levels_by_role(trace, device)
    assert [levels.outside_rows(e) for e in range(timeline.positions)] == [10, 30, 20]
    assert levels.outside_rows(-1) == 0
    from memtui.analysis.roles.figures import annotate_state

    state = annotate_state(trace, device, {"event": 1})
    assert state["by_role"]["other"] == state["by_role_other_outside_rows"] == 30


def test_other_in_words():
    """Worked by hand: ``other`` outside any operator row is said so, the rest is bytes no
    rule explains, and both where it is split."""
    rows = "outside any operator row (parameters, optimizer state and whatever else no " \
        "profiled operator allocated, not told apart)"
    roles = {"activation": 5, "other": 100}
    assert roles_text(roles) == "activations 5 B, other 100 B that no rule explains"
    assert roles_text(roles, 100) == f"activations 5 B, other 100 B {rows}"
    assert roles_text(roles, 40) == \
        f"activations 5 B, other 100 B: 40 B {rows}, 60 B that no rule explains"
    assert roles_text(roles, 400) == f"activations 5 B, other 100 B {rows}"  # capped
    assert roles_text({"parameter": 512}, 7) == "parameters 512 B"  # no other, no words
    assert roles_text({}) == "nothing"


def test_forward_operators_inside_a_backward():
    """A backward recomputing a layer (a short run of forward operators between backward
    ones) keeps it; the next micro-batch's whole forward between two backwards stays a
    forward (gradient accumulation)."""
    from memtui.analysis.roles.operators import _inside_backward

    F, B, S = FORWARD, BACKWARD, OPTIMIZER  # noqa: N806
    kinds = np.array([F] * 10 + [B] * 3 + [F] * 2 + [B] * 3 + [F] * 10 + [B] * 6 + [S] * 2)
    smoothed = _inside_backward(kinds)
    assert smoothed[13:15].tolist() == [B, B]  # the recomputed layer
    assert smoothed[18:28].tolist() == [F] * 10  # micro-batch 2's forward
    assert smoothed[:10].tolist() == [F] * 10 and smoothed[-2:].tolist() == [S, S]
