"""Comparing two captures (analysis.compare, ``memtui compare``).

Hand-made pairs of the same loop (tests/helpers/compare_traces.py) with answers worked out by
hand: a leak, a peak that moved to another stack, runs of different lengths; then the
real msMemScope pair (baseline / leaks) and real snapshots of different torch versions.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from memtui.analysis.across.compare import align, compare, device_pairs, steps_of
from memtui.loading import load_traces
from memtui.sources import open_capture
from tests.conftest import require_shared, shared_files
from tests.helpers.compare_traces import MiB, write_devices, write_loop


@pytest.fixture(scope="module")
def pair_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("compare")
    return {
        "clean": write_loop(folder / "clean.pickle"),
        "leak": write_loop(folder / "leak.pickle", leak=MiB),
        "moved": write_loop(folder / "moved.pickle", forward=2 * MiB, backward=8 * MiB),
        "fwd_big": write_loop(folder / "fwd_big.pickle", forward=8 * MiB, backward=2 * MiB),
        "long": write_loop(folder / "long.pickle", steps=6, start_us=5_000_000),
    }


def _device(a, b, **options):
    result = compare(open_capture(a), open_capture(b), **options)
    assert len(result.devices) == 1
    return result.devices[0].to_json()


def test_the_leaking_stack_comes_first_with_its_delta(pair_files):
    d = _device(pair_files["clean"], pair_files["leak"])
    # clean: 4 MiB forward + 2 MiB backward at the peak, nothing at the end
    # leak: 1 MiB per step never freed; the last step's peak holds the 3 earlier ones
    assert d["peak_allocated"] == [6 * MiB, 9 * MiB, 3 * MiB]
    assert d["end_allocated"] == [0, 4 * MiB, 4 * MiB]
    first = d["by_stack"][0]
    assert (first["label"], first["at"], first["delta"]) == (
        "log_metrics (train.py:60)", "end", 4 * MiB)
    assert first["file"] == "/home/u/train.py" and first["line"] == 60
    assert first["only_in"] == "b"
    peak = [r for r in d["by_stack"] if r["at"] == "peak"]
    assert [(r["label"], r["delta"]) for r in peak] == [("log_metrics (train.py:60)", 3 * MiB)]
    # every step's peak grew by the leaks before it
    assert [s["delta"] for s in d["steps"]] == [0, MiB, 2 * MiB, 3 * MiB]
    assert [s["a_peak"] for s in d["steps"]] == [6 * MiB] * 4
    # the four leaked blocks have no counterpart alive at A's end
    [new] = d["new_blocks_at_end"]
    assert (new["label"], new["size"], new["count"], new["bytes"]) == (
        "log_metrics (train.py:60)", MiB, 4, 4 * MiB)


def test_the_reverse_names_the_stack_only_in_a(pair_files):
    d = _device(pair_files["leak"], pair_files["clean"])
    first = d["by_stack"][0]
    assert (first["delta"], first["only_in"]) == (-4 * MiB, "a")
    assert d["new_blocks_at_end"] == []


def test_a_peak_that_moved_to_another_stack(pair_files):
    d = _device(pair_files["fwd_big"], pair_files["moved"])
    assert d["peak_allocated"] == [10 * MiB, 10 * MiB, 0]
    peak = {r["label"]: r["delta"] for r in d["by_stack"] if r["at"] == "peak"}
    assert peak == {"forward (model.py:10)": -6 * MiB, "backward (model.py:20)": 6 * MiB}
    assert all(r["only_in"] is None for r in d["by_stack"])
    assert not [r for r in d["by_stack"] if r["at"] == "end"]


def test_runs_of_different_lengths_align_by_step(pair_files):
    a, b = open_capture(pair_files["clean"]), open_capture(pair_files["long"])
    assert steps_of(a, "cuda:0").height == 4 and steps_of(b, "cuda:0").height == 6
    d = compare(a, b).devices[0]
    assert d.alignment.mode == "step"
    assert [s["step"] for s in d.steps] == [0, 1, 2, 3]
    # step k of A maps onto step k of B, though B started 4 s later
    step_a, step_b = steps_of(a, "cuda:0")["t"], steps_of(b, "cuda:0")["t"]
    assert d.alignment.a_to_b(step_a.to_numpy()).tolist() == step_b.head(4).to_list()
    assert d.alignment.b_to_a(step_b.head(4).to_numpy()).tolist() == step_a.to_list()
    # shifted by two steps: A's step 0 against B's step 2, four pairs still
    shifted = align(a, b, "cuda:0", "cuda:0", "step", shift=2)
    assert shifted.steps == 4
    assert int(shifted.a_to_b(step_a[0])) == step_b[2]
    assert [s["step"] for s in compare(a, b, shift=2).devices[0].steps] == [0, 1, 2, 3]


def test_time_and_position_alignments(pair_files):
    a, b = open_capture(pair_files["clean"]), open_capture(pair_files["long"])
    a0, b0 = int(a.events["t"][0]), int(b.events["t"][0])
    timed = align(a, b, "cuda:0", "cuda:0", "time")
    assert int(timed.a_to_b(a0 + 123)) == b0 + 123
    assert int(align(a, b, "cuda:0", "cuda:0", "time", shift=7).a_to_b(a0)) == b0 + 7
    by_event = align(a, b, "cuda:0", "cuda:0", "position", shift=3)
    ta, tb = a.events["t"].to_numpy(), b.events["t"].to_numpy()
    assert by_event.a_to_b(ta[:5]).tolist() == tb[3:8].tolist()
    # past the pairs the map goes on at slope 1
    assert int(by_event.a_to_b(ta[-1] + 10)) == int(by_event.a_to_b(ta[-1])) + 10


def test_without_steps_the_default_is_time(pair_files, tmp_path):
    a = open_capture(pair_files["clean"])
    b = open_capture(write_loop(tmp_path / "two.pickle", steps=2))  # too short to recur
    b.markers = b.markers.clear()
    assert steps_of(b, "cuda:0").is_empty()
    assert compare(a, b).mode == "time"
    assert compare(a, b, mode="step").mode == "time"  # falls back


def test_device_pairs_by_name_then_order(tmp_path):
    """A holds cuda:0 (clean) and cuda:1 (1 MiB leaked a step), B cuda:1 (2 MiB a step)
    and cuda:2 (1 MiB a step): cuda:1 pairs with cuda:1 though it comes second in A and
    first in B, and the two left over pair in order (by order alone every pair would be
    wrong)."""
    a = open_capture(write_devices(tmp_path / "a.pickle", {0: {}, 1: {"leak": MiB}}))
    b = open_capture(write_devices(tmp_path / "b.pickle",
                                   {1: {"leak": 2 * MiB}, 2: {"leak": MiB}}))
    assert a.meta.device_names == ["cuda:0", "cuda:1"]
    assert b.meta.device_names == ["cuda:1", "cuda:2"]
    assert device_pairs(a, b) == [("cuda:1", "cuda:1"), ("cuda:0", "cuda:2")]
    same, rest = (d.to_json() for d in compare(a, b).devices)
    assert (same["device_a"], same["device_b"]) == ("cuda:1", "cuda:1")
    # 4 steps: the peak is a step's 4 + 2 MiB plus the three leaks before it; the end holds
    # the four leaks
    assert same["peak_allocated"] == [9 * MiB, 12 * MiB, 3 * MiB]
    assert same["end_allocated"] == [4 * MiB, 8 * MiB, 4 * MiB]
    assert [(r["at"], r["delta"], r["only_in"]) for r in same["by_stack"]] == [
        ("end", 4 * MiB, None), ("peak", 3 * MiB, None)]
    assert (rest["device_a"], rest["device_b"]) == ("cuda:0", "cuda:2")
    assert rest["peak_allocated"] == [6 * MiB, 9 * MiB, 3 * MiB]
    assert rest["end_allocated"] == [0, 4 * MiB, 4 * MiB]
    assert {r["only_in"] for r in rest["by_stack"]} == {"b"}


def test_the_files_load_in_parallel_in_order(pair_files):
    a, b = load_traces([pair_files["clean"], pair_files["long"]])
    assert a.meta.path.endswith("clean.pickle") and b.meta.path.endswith("long.pickle")


# -- real captures ----------------------------------------------------------------------


def test_msmemscope_pair_attributes_the_extra_memory_to_its_ops():
    folder = require_shared("msmemscope")
    base = folder / "example__compare__baseline.csv"
    leaks = folder / "example__compare__leaks.csv"
    d = _device(base, leaks)
    assert d["peak_allocated"] == [16781824, 20782080, 4000256]
    assert d["end_allocated"] == [3072, 8003584, 8000512]
    ops = {(r["label"], r["at"]): r for r in d["by_op"]}
    copy = ops["torch._ops.aten._to_copy.default", "end"]
    # two 4000256-byte tensors made by _to_copy stay alive in the leaks run
    assert (copy["delta"], copy["a_launches"], copy["b_launches"], copy["only_in"]) == (
        8000512, 0, 2, "b")
    assert ops["torch._ops.aten._to_copy.default", "peak"]["delta"] == 4000256
    randn = ops["torch._ops.aten.randn.default", "end"]
    assert (randn["a_launches"], randn["b_launches"], randn["only_in"]) == (0, 2, "b")
    # launched in B only, no byte live at a peak or end: one row (not one "0 B -> 0 B"
    # row per moment), and the text says why it is there
    assert ("torch._ops.aten.randn.default", "peak") not in ops
    assert randn["delta"] == 0 and randn["a_bytes"] == randn["b_bytes"] == 0
    assert d["by_op"][0]["label"] == "torch._ops.aten._to_copy.default"
    assert sum(r["bytes"] for r in d["new_blocks_at_end"]) == 8000512


def test_real_snapshots_of_different_torch_versions():
    require_shared("torch_snapshots")
    old = [p for p in shared_files("torch_snapshots", "t20_*.pickle")]
    new = [p for p in shared_files("torch_snapshots", "t26_*.pickle")]
    if not old or not new:
        pytest.skip("the torch 2.0 and 2.6 snapshots are absent")
    a, b = load_traces([old[0], new[0]])
    result = compare(a, b)
    data = json.loads(json.dumps(result.to_json()))
    [d] = data["devices"]
    assert d["peak_allocated"][2] == d["peak_allocated"][1] - d["peak_allocated"][0]
    # the attribution at each peak accounts for all of it
    for side, comparison in (("a", result.devices[0].a), ("b", result.devices[0].b)):
        alive = comparison.blocks.filter(pl_mask(comparison.alive_peak))["size"].sum()
        assert alive == comparison.peak, side
    peak_rows = [r for r in d["by_stack"] if r["at"] == "peak"]
    assert sum(r["delta"] for r in peak_rows) == d["peak_allocated"][2]


def pl_mask(mask: np.ndarray):
    import polars as pl
    return pl.Series(mask)


def test_curves_on_either_axis_and_their_delta(pair_files):
    from memtui.analysis.across.compare import on_axis, realign, sample

    a, b = open_capture(pair_files["clean"]), open_capture(pair_files["leak"])
    d = compare(a, b).devices[0]
    this, mapped, delta = on_axis(d, "a")
    step = steps_of(a, "cuda:0")
    # at the end of A's last step, B holds its four leaks (mapped by step onto A's axis)
    end = int(step["t_end"][-1]) - 1
    assert int(sample(delta, np.array([end]))[0]) == 4 * MiB
    assert int(sample(this, np.array([end]))[0]) == 0
    # in the middle of step 2 (both tensors alive): B holds 2 leaks more
    middle = int(step["t"][2]) + 25_000
    assert int(sample(mapped, np.array([middle]))[0]) == 6 * MiB + 2 * MiB
    _, _, delta_b = on_axis(d, "b")
    assert int(delta_b.values.max()) == 4 * MiB and int(delta_b.values.min()) == 0
    moved = realign(d, a, b, "position", 1)
    assert moved.alignment.mode == "position" and moved.steps == []
    assert moved.by_stack.equals(d.by_stack)


def test_diff_rows_and_the_blocks_behind_a_row(pair_files):
    from memtui.analysis.across.compare import blocks_of, diff_rows

    a, b = open_capture(pair_files["clean"]), open_capture(pair_files["leak"])
    d = compare(a, b).devices[0]
    rows = diff_rows(d)
    first = rows.row(0, named=True)
    assert (first["kind"], first["label"], first["at"], first["delta"]) == (
        "stack", "log_metrics (train.py:60)", "end", 4 * MiB)
    ids_a, ids_b = blocks_of(d, "stack", first["key"], "end")
    assert ids_a.size == 0 and ids_b.size == 4
    leaked = b.blocks.filter(b.blocks["block_id"].is_in(ids_b.tolist()))
    assert leaked["size"].to_list() == [MiB] * 4 and leaked["t_free"].null_count() == 4
    ids_a, ids_b = blocks_of(d, "stack", rows.filter(
        rows["label"] == "forward (model.py:10)")["key"][0] if rows.filter(
        rows["label"] == "forward (model.py:10)").height else "forward\x1fmodel.py\x1f10")
    assert ids_a.size == 4 and ids_b.size == 4  # every forward activation, either run


def test_without_markers_the_recurring_pattern_gives_the_steps(tmp_path):
    # the loop's other stacks (backward, loss, step) keep time with forward's allocation,
    # which beats once per step: 4 steps in A, 6 in B
    a = open_capture(write_loop(tmp_path / "a.pickle", temporaries=MiB // 4))
    b = open_capture(write_loop(tmp_path / "b.pickle", steps=6, start_us=5_000_000,
                                temporaries=MiB // 4))
    a.markers, b.markers = a.markers.clear(), b.markers.clear()
    d = compare(a, b).devices[0]
    assert d.alignment.mode == "step"
    assert steps_of(a, "cuda:0").height == 4 and steps_of(b, "cuda:0").height == 6
    assert [s["delta"] for s in d.steps] == [0, 0, 0, 0]


def test_step_peaks_by_hand():
    from memtui.analysis.across.compare import step_peaks
    from memtui.analysis.timeline.levels import Level

    level = Level(np.array([0, 10, 20, 30, 40, 50]), np.array([1, 5, 2, 7, 3, 4]))
    steps = pl.DataFrame({"t": [0, 15, 30, 45, 60], "t_end": [15, 30, 45, 60, 70]})
    # [0,15): 1, 5; [15,30): 5 held at 15, 2; [30,45): 7, 3; [45,60): 3 held, 4; after: 4
    assert step_peaks(level, steps).tolist() == [5, 5, 7, 4, 4]


def test_fewer_blocks_alive_in_b_are_no_new_blocks(pair_files, tmp_path):
    # B leaks in 2 steps what A leaks in 4: fewer of the same blocks, nothing new (the
    # difference of two counts must not wrap around as unsigned)
    short = open_capture(write_loop(tmp_path / "short.pickle", steps=2, leak=MiB))
    d = compare(open_capture(pair_files["leak"]), short).devices[0]
    assert d.new_blocks.is_empty()
    assert d.to_json()["end_allocated"] == [4 * MiB, 2 * MiB, -2 * MiB]
    both = compare(open_capture(pair_files["leak"]), open_capture(pair_files["leak"]))
    assert both.devices[0].new_blocks.is_empty() and both.devices[0].by_stack.is_empty()


def test_blocks_without_levels_make_their_own():
    from memtui.analysis.across.compare import blocks_level
    from memtui.analysis.timeline.levels import Level

    blocks = pl.DataFrame({
        "size": [100, 50, 30, 7], "t_alloc": [10, 20, 20, None], "t_free": [40, 30, None, 25],
        "ghost": [False, False, False, True]})
    level = blocks_level(blocks)
    assert isinstance(level, Level)
    # the ghost (7) from the start; +100 at 10; +80 at 20; -7 at 25; -50 at 30; -100 at 40
    assert level.t.tolist() == [10, 10, 20, 25, 30, 40]
    assert level.values.tolist() == [7, 107, 187, 180, 130, 30]
    assert level.peak() == (187, 2)
