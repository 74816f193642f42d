"""The reopen cache (memtui/cache.py): a reopened trace equals a fresh one, broken or stale
entries are never trusted, nothing is written beside the input, the cap evicts the oldest,
``--no-cache`` and ``memtui cache clear``.

conftest.py gives every test its own empty ``$XDG_CACHE_HOME`` (the ``isolated_cache``
fixture returns its ``memtui`` folder).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from memtui import cache
from memtui.analysis.timeline.levels import allocated_level, reserved_level
from memtui.cli import main
from memtui.loading import load_trace
from memtui.model import SCHEMAS, MemoryTrace, validate
from memtui.sources import open_capture
from tests.conftest import shared_files
from tests.helpers.cache_damage import FILE_DAMAGES, damage_file, only_entry
from tests.helpers.hand_snapshot import write_hand_snapshot


def assert_same_trace(got: MemoryTrace, want: MemoryTrace) -> None:
    plain = {k: v for k, v in want.meta.extra.items() if not isinstance(v, pl.DataFrame)}
    assert {k: v for k, v in got.meta.extra.items() if k in plain} == plain
    for key, frame in want.meta.extra.items():
        if isinstance(frame, pl.DataFrame):
            assert got.meta.extra[key].equals(frame), key
    assert dataclasses.replace(got.meta, extra={}) == dataclasses.replace(want.meta, extra={})
    for name in SCHEMAS:
        assert got.frame(name).schema == want.frame(name).schema, name
        assert got.frame(name).equals(want.frame(name)), name


def entries(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if not p.name.startswith(".")) if root.is_dir() else []


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    folder = tmp_path / "input"
    folder.mkdir()
    return write_hand_snapshot(folder / "hand.pickle")


@pytest.fixture(params=["mapped", "read"])
def read_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways an entry comes back: memory-mapped through pyarrow (big entries) or read
    by polars (small ones, where importing pyarrow would cost more than the copy)."""
    monkeypatch.setattr(cache, "MAP_FROM_BYTES", 0 if request.param == "mapped" else 1 << 62)
    return request.param


def test_reopen_comes_from_the_cache_and_equals_a_fresh_load(snapshot, isolated_cache,
                                                             read_mode):
    first = load_trace(snapshot)
    (entry,) = entries(isolated_cache)
    names = {p.name for p in entry.iterdir()}
    assert {n for n in names if not n.startswith(("level-", "derived-levels"))} == {
        "manifest.json", *(f"{n}.arrow" for n in SCHEMAS)}
    key = cache.key_of(snapshot)
    from_cache = cache.lookup(key)
    assert from_cache is not None
    fresh = open_capture(snapshot)
    assert_same_trace(from_cache, fresh)
    validate(from_cache)
    again = load_trace(snapshot)  # through the cache, flags applied after
    assert_same_trace(again, first)


def test_nothing_is_written_beside_the_input(snapshot):
    load_trace(snapshot)
    load_trace(snapshot)
    assert [p.name for p in snapshot.parent.iterdir()] == ["hand.pickle"]


@pytest.mark.parametrize("damage", ["truncate", "garbage", "manifest", "missing"])
def test_a_corrupt_entry_is_ignored_and_rebuilt(snapshot, isolated_cache, damage, read_mode):
    want = load_trace(snapshot, use_cache=False)
    load_trace(snapshot)
    (entry,) = entries(isolated_cache)
    events = entry / "events.arrow"
    if damage == "truncate":
        events.write_bytes(events.read_bytes()[:100])
    elif damage == "garbage":  # same size, nothing Arrow can read
        events.write_bytes(b"\x17" * events.stat().st_size)
    elif damage == "manifest":
        (entry / "manifest.json").write_text("{not json")
    else:
        events.unlink()
    assert cache.lookup(cache.key_of(snapshot)) is None
    assert not entry.exists()  # the broken entry was deleted...
    assert_same_trace(load_trace(snapshot), want)
    assert len(entries(isolated_cache)) == 1  # ...and written again
    assert cache.lookup(cache.key_of(snapshot)) is not None


def test_an_entry_of_another_model_version_is_not_used(snapshot, isolated_cache, monkeypatch):
    load_trace(snapshot)
    monkeypatch.setattr(cache, "MODEL_VERSION", cache.MODEL_VERSION + 1)
    assert cache.lookup(cache.key_of(snapshot)) is None


def test_a_changed_input_gets_a_new_entry_and_the_old_one_goes(snapshot, isolated_cache):
    load_trace(snapshot)
    (old,) = entries(isolated_cache)
    data = pickle.loads(snapshot.read_bytes())
    data["device_traces"][0] = data["device_traces"][0][:-1]  # drop the last event (the OOM)
    snapshot.write_bytes(pickle.dumps(data))
    trace = load_trace(snapshot)
    assert trace.events.height == open_capture(snapshot).events.height
    (new,) = entries(isolated_cache)
    assert new.name != old.name


def test_a_manifest_whose_key_differs_is_stale(snapshot, isolated_cache):
    load_trace(snapshot)
    (entry,) = entries(isolated_cache)
    manifest = json.loads((entry / "manifest.json").read_text())
    manifest["key"]["size"] += 1
    (entry / "manifest.json").write_text(json.dumps(manifest))
    assert cache.lookup(cache.key_of(snapshot)) is None


def test_meta_that_json_cannot_carry_is_not_cached(snapshot, isolated_cache):
    trace = open_capture(snapshot)
    trace.meta.extra["pair"] = (1, 2)  # a tuple would come back a list
    assert cache.meta_to_json(trace.meta) is None
    assert cache.store(cache.key_of(snapshot), trace) is False
    assert entries(isolated_cache) == []


def test_meta_round_trips_through_json(snapshot):
    meta = open_capture(snapshot).meta
    meta.extra["nested"] = {"a": [1, 2.5, None, "x"], "b": {"c": True}}
    data = cache.meta_to_json(meta)
    assert cache.meta_from_json(json.loads(json.dumps(data))) == meta


def test_the_cap_evicts_the_least_recently_used(tmp_path, isolated_cache, monkeypatch):
    paths = []
    for i in range(3):
        folder = tmp_path / f"in{i}"
        folder.mkdir()
        paths.append(write_hand_snapshot(folder / "hand.pickle"))
    load_trace(paths[0])
    (first,) = entries(isolated_cache)
    one_entry = sum(f.stat().st_size for f in first.iterdir())
    monkeypatch.setenv("MEMTUI_CACHE_MAX_BYTES", str(int(one_entry * 2.5)))
    os.utime(first, (1, 1))  # long unused
    load_trace(paths[1])
    load_trace(paths[2])  # three entries do not fit: the oldest goes
    left = {e.name for e in entries(isolated_cache)}
    assert len(left) == 2
    assert first.name not in left
    assert cache.key_of(paths[2]).folder in left


def test_folders_are_not_cached(tmp_path, isolated_cache):
    assert cache.key_of(tmp_path) is None


def test_no_cache_flag_reads_and_writes_nothing(snapshot, isolated_cache, capsys, monkeypatch):
    assert main(["summary", "--no-cache", str(snapshot)]) == 0
    assert entries(isolated_cache) == []
    assert os.environ.get("MEMTUI_NO_CACHE") == "1"
    monkeypatch.delenv("MEMTUI_NO_CACHE")
    assert main(["summary", str(snapshot)]) == 0
    assert len(entries(isolated_cache)) == 1
    out = capsys.readouterr().out
    first, second = out[: len(out) // 2], out[len(out) // 2:]
    assert first == second  # the same figures with and without the cache


def test_cache_clear_command(snapshot, isolated_cache, capsys):
    load_trace(snapshot)
    assert main(["cache", "info"]) == 0
    assert "1 entry," in capsys.readouterr().out
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out.startswith("cleared 1 entry ")
    assert entries(isolated_cache) == []


@pytest.mark.parametrize("path", shared_files("torch_snapshots", "*.pickle")[:4]
                         + shared_files("msmemscope", "*.db")[:2]
                         + shared_files("msmemscope", "*.csv")[:1]
                         + shared_files("profiler", "*.db")[:2]
                         + shared_files("profiler", "*operator_memory.csv")[:1],
                         ids=lambda p: p.name)
def test_real_captures_reopen_equal(path):
    fresh = open_capture(path)
    load_trace(path)
    from_cache = cache.lookup(cache.key_of(path))
    assert from_cache is not None
    assert_same_trace(from_cache, fresh)


def test_summary_figures_come_back_from_the_cache(snapshot, isolated_cache, capsys):
    assert main(["summary", "--json", str(snapshot)]) == 0
    fresh = capsys.readouterr().out
    (entry,) = entries(isolated_cache)
    assert (entry / "derived-summary.json").is_file()
    assert main(["summary", "--json", str(snapshot)]) == 0
    assert capsys.readouterr().out == fresh
    (entry / "derived-summary.json").write_text('{"devices": "tampered"}')
    manifest = json.loads((entry / "manifest.json").read_text())
    manifest["key"]["edges"] = "0"  # a stale manifest: its derived results are not used
    (entry / "manifest.json").write_text(json.dumps(manifest))
    assert main(["summary", "--json", str(snapshot)]) == 0
    assert capsys.readouterr().out == fresh


def test_a_reopen_names_the_path_as_given_this_time(snapshot, capsys, monkeypatch):
    assert main(["summary", "--json", str(snapshot)]) == 0
    assert json.loads(capsys.readouterr().out)["path"] == str(snapshot)
    monkeypatch.chdir(snapshot.parent)
    trace = load_trace("hand.pickle")  # the same file, from the cache
    assert trace.meta.path == "hand.pickle"
    assert main(["summary", "--json", "hand.pickle"]) == 0
    assert json.loads(capsys.readouterr().out)["path"] == "hand.pickle"


def test_an_entry_removed_meanwhile_counts_as_empty(tmp_path, monkeypatch):
    """Two stores at once (``memtui compare`` loads A and B, each stores and evicts): an entry
    the other one deleted between the listing and the sizing is 0 bytes, not a traceback."""
    cache_module = cache

    root = tmp_path / "cache"
    (root / "a-1").mkdir(parents=True)
    (root / "a-1" / "frame.arrow").write_bytes(b"x" * 10)
    (root / "b-2").mkdir()
    (root / "b-2" / "frame.arrow").write_bytes(b"y" * 10)
    real_size = cache_module._entry_size

    def size_after_the_other_store_evicted(entry):
        shutil.rmtree(root / "a-1", ignore_errors=True)
        return real_size(entry)

    monkeypatch.setattr(cache_module, "_entry_size", size_after_the_other_store_evicted)
    assert cache_module.evict(root, 5, keep="b-2") == ["a-1", "b-2"]
    assert real_size(tmp_path / "never-there") == 0


def test_a_reopened_summary_prints_the_same_text_naming_the_path_given(snapshot, capsys,
                                                                       monkeypatch):
    assert main(["summary", str(snapshot)]) == 0
    fresh = capsys.readouterr().out
    assert fresh.startswith(f"{snapshot}  (")
    assert main(["summary", str(snapshot)]) == 0  # from the entry's kept text
    assert capsys.readouterr().out == fresh
    monkeypatch.chdir(snapshot.parent)
    assert main(["summary", "hand.pickle"]) == 0
    assert capsys.readouterr().out == fresh.replace(str(snapshot), "hand.pickle", 1)
    assert main(["summary", "--no-cache", "hand.pickle"]) == 0
    assert capsys.readouterr().out == fresh.replace(str(snapshot), "hand.pickle", 1)


def assert_same_levels(got: MemoryTrace, want: MemoryTrace) -> None:
    for device in want.meta.device_names:
        for level_of in (allocated_level, reserved_level):
            a, b = level_of(got, device), level_of(want, device)
            assert (a is None) == (b is None), (device, level_of.__name__)
            if a is not None:
                assert np.array_equal(a.t, b.t) and np.array_equal(a.values, b.values)


def test_levels_are_kept_and_a_reopen_draws_them(snapshot, isolated_cache):
    fresh = open_capture(snapshot)
    load_trace(snapshot)
    kept = cache.lookup_levels(cache.key_of(snapshot))
    assert set(kept) == set(fresh.meta.device_names)
    for device, (allocated, reserved) in kept.items():
        want = allocated_level(fresh, device)
        assert np.array_equal(allocated.t, want.t)
        assert np.array_equal(allocated.values, want.values)
        assert (reserved is None) == (reserved_level(fresh, device) is None)
    again = load_trace(snapshot)
    device = fresh.meta.device_names[0]
    assert allocated_level(again, device) is kept_level(again, device)  # not computed again
    assert_same_levels(again, fresh)


def test_a_shared_array_of_times_is_kept_once(snapshot, isolated_cache):
    """A snapshot's allocated and reserved levels share the walked times: one file is
    named for both, each file holds what ``np.save`` would write, and no staging file
    is left beside them."""
    load_trace(snapshot)
    entry = only_entry(isolated_cache)
    names = json.loads((entry / "derived-levels.json").read_text())["value"]
    device = next(iter(names))
    allocated, reserved = names[device]["allocated"], names[device]["reserved"]
    assert allocated["t"] == reserved["t"] and allocated["values"] != reserved["values"]
    fresh = open_capture(snapshot)
    level = allocated_level(fresh, device)
    for part in ("t", "values"):
        name, size, _ = allocated[part]
        saved = isolated_cache / "want.npy"
        np.save(saved, getattr(level, part).astype(np.int64))
        assert (entry / name).read_bytes() == saved.read_bytes()
        assert size == saved.stat().st_size
    assert not list(entry.glob(".tmp-*"))
    assert sorted(p.name for p in entry.glob("level-*")) == sorted(
        {allocated["t"][0], allocated["values"][0], reserved["values"][0]})


def kept_level(trace: MemoryTrace, device: str):
    from memtui.analysis.timeline.levels import _seeded

    found, level = _seeded(trace, "allocated", device)
    assert found
    return level


@pytest.mark.parametrize("damage", [*FILE_DAMAGES, "names"])
def test_broken_level_files_are_not_used(snapshot, isolated_cache, damage):
    fresh = open_capture(snapshot)
    load_trace(snapshot)
    entry = only_entry(isolated_cache)
    (file, *_) = sorted(entry.glob("level-*-allocated-values.npy"))
    if damage in FILE_DAMAGES:
        damage_file(file, damage)
    else:
        (entry / "derived-levels.json").write_text('{"cuda:0": 1}')
    assert cache.lookup_levels(cache.key_of(snapshot)) == {}
    assert_same_levels(load_trace(snapshot), fresh)


def test_real_captures_keep_the_same_levels():
    paths = shared_files("torch_snapshots", "*.pickle")[:3]
    if not paths:
        pytest.skip("../shared/data/torch_snapshots is absent")
    for path in paths:
        fresh = open_capture(path)
        load_trace(path)
        assert_same_levels(load_trace(path), fresh)


def test_two_threads_wait_for_the_same_store(monkeypatch):
    """The CLI's exit and the UI's indexing thread may wait at once: each returns only when
    the store has finished, and neither fails (one used to take the thread from the
    other's list between its check and its pop)."""
    import threading
    import time

    finished = threading.Event()

    def slow_store(key, trace, levels_of=None):
        time.sleep(0.3)
        finished.set()

    monkeypatch.setattr(cache, "store", slow_store)
    cache.store_in_background(None, None)
    errors, seen = [], []

    def waiter():
        try:
            cache.wait_for_stores()
            seen.append(finished.is_set())
        except Exception as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)

    threads = [threading.Thread(target=waiter) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and seen == [True] * 4
    assert not cache._pending


def test_a_store_told_to_wait_writes_nothing_until_its_moment(snapshot, isolated_cache):
    """The UI's store waits for the first paint: no entry before it, the entry after."""
    import threading
    import time

    painted = threading.Event()
    load_trace(snapshot, store_in_background=True, store_after=painted)
    time.sleep(0.3)
    assert not isolated_cache.exists() or not any(isolated_cache.glob("*/manifest.json"))
    painted.set()
    cache.wait_for_stores()
    assert cache.lookup(cache.key_of(snapshot)) is not None


def test_waiting_for_stores_starts_one_still_waiting_for_its_moment(snapshot, isolated_cache,
                                                                    monkeypatch):
    """A quit before the first paint never hangs on the store: waiting starts it."""
    import threading

    monkeypatch.setattr(cache, "DEFER_LIMIT_S", 600.0)
    load_trace(snapshot, store_in_background=True, store_after=threading.Event())
    waiting = threading.Thread(target=cache.wait_for_stores, daemon=True)
    waiting.start()
    waiting.join(timeout=30)
    assert not waiting.is_alive(), "waiting for the stores hung on one not yet started"
    assert not cache._pending and not cache._gates
    assert cache.lookup(cache.key_of(snapshot)) is not None


def test_a_store_whose_moment_never_comes_starts_after_the_limit(snapshot, isolated_cache,
                                                                monkeypatch):
    import threading
    import time

    monkeypatch.setattr(cache, "DEFER_LIMIT_S", 0.2)
    load_trace(snapshot, store_in_background=True, store_after=threading.Event())
    deadline = time.monotonic() + 30
    while cache.lookup(cache.key_of(snapshot)) is None:
        assert time.monotonic() < deadline, "the store never started"
        time.sleep(0.05)
    cache.wait_for_stores()


# -- columns of one value: kept in the manifest, not written (issue 34) ---------------------

REPO_SNAPSHOTS = sorted((Path(__file__).parent / "data").glob("*.pickle"))


def test_columns_of_one_value_are_kept_in_the_manifest_not_written(snapshot, isolated_cache,
                                                                     read_mode, monkeypatch):
    monkeypatch.setattr(cache, "CONSTANTS_FROM_ROWS", 2)
    fresh = open_capture(snapshot)
    load_trace(snapshot)
    entry = only_entry(isolated_cache)
    manifest = json.loads((entry / "manifest.json").read_text())
    kept = {name: {c[1]: c[3] for c in columns}
            for name, columns in manifest["constants"].items()}
    # the hand snapshot has one device, and no block has an owner
    assert kept["events"]["device"] == "cuda:0"
    assert "owner" in kept["blocks"] and kept["blocks"]["owner"] is None
    written = pl.read_ipc_schema(entry / "events.arrow")
    assert "device" not in written and "t" in written
    reopened = cache.lookup(cache.key_of(snapshot))
    assert reopened is not None
    assert_same_trace(reopened, fresh)


def test_a_frame_of_one_value_in_every_column_still_writes_one(isolated_cache):
    frame = pl.DataFrame({"a": [7] * 3000, "b": ["x"] * 3000})
    written, constants = cache._without_constants(frame)
    assert written.width == 1 and len(constants) == 1  # its rows are still in the file
    assert cache._with_constants(written, constants).equals(frame)


def test_columns_of_several_values_are_written(isolated_cache):
    frame = pl.DataFrame({"a": [1, 2] * 1500, "b": ["x", None] * 1500,
                          "c": [None] * 3000, "d": ["y"] * 3000},
                         schema={"a": pl.Int64, "b": pl.String, "c": pl.Int64, "d": pl.String})
    written, constants = cache._without_constants(frame)
    assert written.columns == ["a", "b"]
    assert constants == [[2, "c", "Int64", None], [3, "d", "String", "y"]]
    assert cache._with_constants(written, constants).equals(frame)
    back = cache._with_constants(written, constants)
    assert back.schema == frame.schema


def test_a_column_one_row_away_from_one_value_is_written(isolated_cache):
    """A value other than the first in the last row only, or a null in the first row only,
    makes a column of several values (each column is compared with its first value)."""
    frame = pl.DataFrame({"e": ["z" * 40] * 2999 + ["z" * 39 + "w"], "f": [None] + [5] * 2999,
                          "g": [True] * 3000, "h": [3] * 2999 + [None]},
                         schema={"e": pl.String, "f": pl.Int64, "g": pl.Boolean,
                                 "h": pl.Int64})
    written, constants = cache._without_constants(frame)
    assert written.columns == ["e", "f", "h"]
    assert constants == [[2, "g", "Boolean", True]]
    assert cache._with_constants(written, constants).equals(frame)


@pytest.mark.parametrize("change", ["value", "dtype", "position"])
def test_an_edited_constant_is_not_trusted(snapshot, isolated_cache, monkeypatch, change):
    monkeypatch.setattr(cache, "CONSTANTS_FROM_ROWS", 2)
    load_trace(snapshot)
    entry = only_entry(isolated_cache)
    file = entry / "manifest.json"
    manifest = json.loads(file.read_text())
    column = next(c for c in manifest["constants"]["events"] if c[1] == "device")
    column[{"value": 3, "dtype": 2, "position": 0}[change]] = {
        "value": "cuda:7", "dtype": "Float64", "position": 99}[change]
    if change != "value":  # a manifest made to agree with itself is still checked
        manifest["constants_digest"] = cache._json_digest(manifest["constants"])
    file.write_text(json.dumps(manifest))
    assert cache.lookup(cache.key_of(snapshot)) is None
    assert not entry.exists()


@pytest.mark.parametrize("path", REPO_SNAPSHOTS + shared_files("torch_snapshots", "*.pickle"),
                         ids=lambda p: p.name)
def test_every_snapshot_reopens_equal_with_its_columns_of_one_value_kept_aside(
        path, isolated_cache, monkeypatch):
    monkeypatch.setattr(cache, "CONSTANTS_FROM_ROWS", 2)
    fresh = open_capture(path)
    load_trace(path)
    from_cache = cache.lookup(cache.key_of(path))
    assert from_cache is not None
    assert_same_trace(from_cache, fresh)


def test_the_store_keeps_the_levels_the_analyses_read(snapshot, isolated_cache):
    """The levels kept beside a new entry are walked on the trace every analysis reads
    (not on the source's own trace, which would hold them twice)."""
    from memtui.analysis.timeline.live import held

    trace = load_trace(snapshot, store_in_background=False)
    device = trace.meta.device_names[0]
    found, level = held(trace, ("allocated_level", device))
    assert found and level is not None
    kept = cache.lookup_levels(cache.key_of(snapshot))
    assert np.array_equal(kept[device][0].values, level.values)
