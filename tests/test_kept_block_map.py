"""The Blocks screen's index kept beside a cache entry (issue 11, goal 3): a reopen seeds
the shared analysis cache with it instead of building it again, it equals a fresh build
in every array and answer, and a broken or stale file is never trusted (the index is
built again)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memtui.analysis.layout import block_map as block_map_module
from memtui.analysis.layout.block_map import BlockMapData
from memtui.analysis.timeline.intervals import IntervalIndex
from memtui.analysis.timeline.live import built, device_index
from memtui.loading import keep_block_map, kept_block_map, load_trace
from memtui.sources import open_capture
from memtui.tui.app import MemtuiApp
from memtui.tui.screens import linked
from memtui.tui.screens.blocks import block_analyses
from tests.helpers.cache_damage import FILE_DAMAGES, damage_file, only_entry

DEMO = Path(__file__).resolve().parents[1] / "snapshots" / "demo_training.pickle"


def intervals(seed: int, n: int = 3000) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    start = rng.integers(0, 10_000, n)
    end = start + rng.integers(1, 3000, n)
    end[rng.random(n) < 0.1] = np.iinfo(np.int64).max  # never freed
    return start, end


@pytest.mark.parametrize("seed", range(4))
def test_an_interval_index_made_from_its_arrays_answers_the_same(seed):
    start, end = intervals(seed)
    built_index = IntervalIndex(start, end, chunk=64)
    again = IntervalIndex.from_arrays(built_index.arrays())
    for t in np.random.default_rng(seed).integers(-5, 14_000, 200):
        assert np.array_equal(again.at(int(t)), built_index.at(int(t)))
        assert np.array_equal(again.overlapping(int(t), int(t) + 700),
                              built_index.overlapping(int(t), int(t) + 700))


@pytest.mark.parametrize("damage", ["offsets not rising", "member out of range",
                                    "start not sorted", "lengths differ", "chunk zero",
                                    "members of the wrong type"])
def test_interval_arrays_that_do_not_fit_together_are_refused(damage):
    arrays = {k: np.array(v) for k, v in IntervalIndex(*intervals(7), chunk=64).arrays().items()}
    if damage == "offsets not rising":
        arrays["cp_offsets"][5] = arrays["cp_offsets"][6] + 1
    elif damage == "member out of range":
        arrays["cp_members"][3] = arrays["order"].size
    elif damage == "start not sorted":
        arrays["start"][[0, -1]] = arrays["start"][[-1, 0]]
    elif damage == "lengths differ":
        arrays["end"] = arrays["end"][:-1]
    elif damage == "chunk zero":
        arrays["chunk"][0] = 0
    else:
        arrays["cp_members"] = arrays["cp_members"].astype(np.int64)
    with pytest.raises(ValueError):
        IntervalIndex.from_arrays(arrays)


@pytest.fixture(scope="module")
def demo():
    return open_capture(DEMO)


def assert_same_map(got: BlockMapData, want: BlockMapData) -> None:
    want.level()  # (made on first use)
    assert set(vars(got)) == set(vars(want))  # an attribute __init__ gains is kept too
    for name in ("rank", "kinds", "by_size", "starts", "start_bytes", "ends", "end_bytes",
                 "by_area"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
    assert np.array_equal(got.level().t, want.level().t)
    assert np.array_equal(got.level().values, want.level().values)
    for part, array in want.index.block_life.arrays().items():
        assert np.array_equal(got.index.block_life.arrays()[part], array), part


def test_block_map_data_made_from_its_arrays_equals_a_fresh_build(demo):
    device = demo.meta.device_names[0]
    want = BlockMapData(device_index(demo, device))
    fresh_index = device_index(open_capture(DEMO), device)  # its block_life not built yet
    got = BlockMapData.from_arrays(fresh_index, want.arrays())
    assert_same_map(got, want)
    t0, t1 = int(want.starts[10]), int(want.ends[-10])
    assert np.array_equal(got.weightiest_overlapping(t0, t1, 50),
                          want.weightiest_overlapping(t0, t1, 50))


def test_block_map_arrays_of_another_device_are_refused(demo):
    device = demo.meta.device_names[0]
    arrays = BlockMapData(device_index(demo, device)).arrays()
    arrays["by_size"] = arrays["by_size"][:-1]
    with pytest.raises(ValueError):
        BlockMapData.from_arrays(device_index(open_capture(DEMO), device), arrays)


def copied(path: Path, folder: Path) -> Path:
    target = folder / path.name
    target.write_bytes(path.read_bytes())
    return target


def opened_and_kept(folder: Path) -> tuple[Path, str, BlockMapData]:
    """The demo opened once (a cache entry) with its Blocks index built and kept: its
    path, first device and the index's data as built."""
    path = copied(DEMO, folder)
    first = load_trace(path)
    device = first.meta.device_names[0]
    want = block_analyses(first, device)[1]
    assert not want.kept
    assert keep_block_map(first, device)
    return path, device, want


def test_a_reopen_reuses_the_kept_block_map(tmp_path, isolated_cache, monkeypatch):
    path, device, want = opened_and_kept(tmp_path)
    again = load_trace(path)

    def no_build(*args, **kwargs):
        raise AssertionError("the kept block map was built again")

    monkeypatch.setattr(block_map_module.BlockMapData, "__init__", no_build)
    got = block_analyses(again, device)[1]
    assert got.kept and built(again, ("block_map", device)) is got
    assert_same_map(got, want)
    assert not keep_block_map(again, device)  # what came from the cache is not kept again


@pytest.mark.parametrize("damage", [*FILE_DAMAGES, "out of range", "names"])
def test_a_broken_kept_block_map_is_built_again(tmp_path, isolated_cache, damage):
    path, device, want = opened_and_kept(tmp_path)
    entry = only_entry(isolated_cache)
    files = sorted(entry.glob("block-map-0-*.npy"))
    assert files
    target = files[0]  # rank
    if damage in FILE_DAMAGES:
        damage_file(target, damage)
    elif damage == "out of range":  # same size, a rank past the blocks
        rank = np.load(target)
        rank[0] = rank.size + 5
        np.save(target, rank)
    else:
        (entry / "derived-arrays-block-map-0.json").write_text('{"rank": 1}')
    again = load_trace(path)
    assert kept_block_map(again, device, device_index(again, device)) is None
    rebuilt = block_analyses(again, device)[1]
    assert not rebuilt.kept
    assert_same_map(rebuilt, want)


def test_nothing_is_kept_without_a_cache_entry(tmp_path, isolated_cache, monkeypatch):
    path = copied(DEMO, tmp_path)
    trace = open_capture(path)  # not stored in the cache
    device = trace.meta.device_names[0]
    block_analyses(trace, device)
    assert not keep_block_map(trace, device)
    assert not list(isolated_cache.glob("*/block-map-*"))


def test_no_cache_reads_no_kept_block_map(tmp_path, isolated_cache, monkeypatch):
    path, device, _ = opened_and_kept(tmp_path)
    again = load_trace(path)
    monkeypatch.setenv("MEMTUI_NO_CACHE", "1")
    assert kept_block_map(again, device, device_index(again, device)) is None
    assert not block_analyses(again, device)[1].kept


async def test_the_app_keeps_the_index_and_a_reopen_does_not_build_it(
        tmp_path, isolated_cache, monkeypatch):
    monkeypatch.setattr(linked, "BACKGROUND_BLOCKS", 0)
    path = copied(DEMO, tmp_path)
    builds = []
    original = BlockMapData.__init__

    def counted(self, index):
        builds.append(index)
        original(self, index)

    monkeypatch.setattr(block_map_module.BlockMapData, "__init__", counted)
    for _ in range(2):
        app = MemtuiApp(path)
        async with app.run_test(size=(80, 24)) as pilot:
            while app.trace is None:
                await pilot.pause(0.02)
            await pilot.pause()
            await app.workers.wait_for_complete()
            await pilot.press("2")
            while "blocks" not in app.painted:
                await pilot.pause(0.02)
    assert len(builds) == 1  # the first open built it; the reopen took the kept one
    assert sorted(p.name for p in isolated_cache.glob("*/derived-arrays-block-map-*.json"))
