"""The reopen cache never serves stale or foreign figures, never follows a link, and cleans
up after a full disk (issue 27, points 1-4, 14 and 16)."""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from memtui import cache
from memtui.analysis.summary import summary
from memtui.cli import main
from memtui.loading import load_trace
from tests.conftest import require_shared
from tests.helpers.cache_damage import only_entry
from tests.helpers.hand_snapshot import write_hand_snapshot
from tests.helpers.live_captures import BURSTS, DbWriter

KiB = 1024


def summary_json(path: Path, capsys, *extra: str) -> dict:
    """``memtui summary PATH --json EXTRA`` in this process (``--no-cache`` turns the cache
    off for the process: turned on again after it)."""
    try:
        assert main(["summary", str(path), "--json", *extra]) == 0
    finally:
        os.environ.pop(cache.NO_CACHE_ENV, None)
    return json.loads(capsys.readouterr().out)


def events_of(data: dict) -> list[int]:
    return [device["events"] for device in data["devices"]]


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    return write_hand_snapshot(tmp_path / "hand.pickle")


@pytest.fixture
def other_snapshot(tmp_path: Path) -> Path:
    import pickle

    from tests.helpers.live_captures import grown_snapshot

    path = tmp_path / "other.pickle"
    path.write_bytes(pickle.dumps(grown_snapshot(5)))
    return path


# -- 1, 2: what the key covers ---------------------------------------------------------------

def test_rows_committed_into_the_wal_are_not_served_stale(tmp_path, isolated_cache, capsys):
    db = tmp_path / "memscope_dump_live.db"
    writer = DbWriter(db)
    try:
        writer.burst(BURSTS[0])
        first = summary_json(db, capsys)
        before = db.stat()
        writer.burst(BURSTS[1] + BURSTS[2])  # into the -wal: the .db keeps size and mtime
        after = db.stat()
        assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
        cached = summary_json(db, capsys)
        fresh = summary_json(db, capsys, "--no-cache")
    finally:
        writer.close()
    assert events_of(cached) == events_of(fresh) != events_of(first)


def test_a_profiler_folder_opened_through_its_info_json_follows_its_files(
        tmp_path, isolated_cache, capsys):
    shared = require_shared("profiler")
    folder = tmp_path / "run_ascend_pt"
    output = folder / "ASCEND_PROFILER_OUTPUT"
    output.mkdir(parents=True)
    shutil.copy(shared / "pt_text_l1_rank0__profiler_info_0.json", folder / "profiler_info_0.json")
    for part in ("memory_record", "operator_memory", "npu_module_mem"):
        shutil.copy(shared / f"pt_text_l1_rank0__{part}.csv", output / f"{part}.csv")
    info = folder / "profiler_info_0.json"
    first = summary_json(info, capsys)
    records = output / "operator_memory.csv"
    lines = records.read_text().splitlines(keepends=True)
    records.write_text("".join(lines[: max(2, len(lines) // 10)]))  # most operators gone
    cached = summary_json(info, capsys)
    fresh = summary_json(info, capsys, "--no-cache")
    assert cached == fresh
    assert cached != first


def test_a_change_in_the_middle_with_size_and_mtime_restored_gets_a_new_key(tmp_path):
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(3 << 20))
    before = big.stat()
    key = cache.key_of(big)
    with open(big, "r+b") as fh:  # a byte far from both hashed ends
        fh.seek(3 << 19)
        fh.write(b"\x00" if fh.read(1) != b"\x00" else b"\x01")
    os.utime(big, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (big.stat().st_size, big.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert cache.key_of(big) != key  # the inode's change time moved


# -- 3: contents are verified before use -----------------------------------------------------

def flip_a_bit(file: Path, where: float = 0.5) -> None:
    data = bytearray(file.read_bytes())
    data[int(len(data) * where)] ^= 0x10
    file.write_bytes(bytes(data))


def test_one_bit_flipped_in_the_events_file_is_caught(snapshot, isolated_cache, capsys):
    fresh = summary_json(snapshot, capsys, "--no-cache")
    load_trace(snapshot)
    entry = only_entry(isolated_cache)
    for file in entry.iterdir():
        if file.name.startswith("derived-summary"):
            file.unlink()  # figures are made from the trace again
    flip_a_bit(entry / "events.arrow", 0.6)
    assert cache.lookup(cache.key_of(snapshot)) is None  # not trusted...
    assert summary_json(snapshot, capsys) == fresh  # ...and built again


def test_every_flipped_byte_of_an_entry_file_is_caught(snapshot, isolated_cache):
    load_trace(snapshot)
    entry = only_entry(isolated_cache)
    events = entry / "events.arrow"
    size = events.stat().st_size
    original = events.read_bytes()
    for offset in range(0, size, max(size // 40, 1)):
        shutil.rmtree(entry, ignore_errors=True)
        load_trace(snapshot)
        damaged = bytearray(original)
        damaged[offset] ^= 0x01
        events.write_bytes(bytes(damaged))
        assert cache.lookup(cache.key_of(snapshot)) is None, offset


def test_swapped_level_files_are_not_used(snapshot, isolated_cache):
    load_trace(snapshot)
    key = cache.key_of(snapshot)
    assert cache.lookup_levels(key)
    entry = only_entry(isolated_cache)
    allocated = entry / "level-0-allocated-values.npy"
    reserved = entry / "level-0-reserved-values.npy"
    a, r = allocated.read_bytes(), reserved.read_bytes()
    assert len(a) == len(r)
    allocated.write_bytes(r)
    reserved.write_bytes(a)
    assert cache.lookup_levels(key) == {}


def test_a_level_rewritten_with_other_points_of_the_same_size_is_not_used(
        snapshot, isolated_cache):
    load_trace(snapshot)
    key = cache.key_of(snapshot)
    entry = only_entry(isolated_cache)
    values = entry / "level-0-allocated-values.npy"
    kept = np.load(values)
    forged = np.full_like(kept, 100)
    forged[0] = 1 << 44  # a 16 TiB "peak" at event 0
    np.save(values, forged, allow_pickle=False)
    assert values.stat().st_size == len(values.read_bytes())
    assert cache.lookup_levels(key) == {}


def test_derived_figures_swapped_between_entries_are_not_printed(
        snapshot, other_snapshot, isolated_cache, capsys):
    mine = summary_json(snapshot, capsys)
    theirs = summary_json(other_snapshot, capsys)
    assert events_of(mine) != events_of(theirs)
    entries = {e.name: e for e in isolated_cache.iterdir()}
    mine_entry = entries[cache.key_of(snapshot).folder]
    theirs_entry = entries[cache.key_of(other_snapshot).folder]
    for file in theirs_entry.glob("derived-summary*.json"):
        shutil.copy(file, mine_entry / file.name)
    assert summary_json(snapshot, capsys) == mine
    assert main(["summary", str(snapshot)]) == 0
    text = capsys.readouterr().out
    assert f"{mine['devices'][0]['events']} events" in text


@pytest.mark.parametrize("forged", [{"devices": 3}, [], {"source": "x"}, "text", None])
def test_a_derived_file_of_another_shape_is_not_used(snapshot, isolated_cache, capsys, forged):
    fresh = summary_json(snapshot, capsys, "--no-cache")
    summary_json(snapshot, capsys)
    entry = only_entry(isolated_cache)
    for file in entry.glob("derived-summary*.json"):
        file.write_text(json.dumps(forged))
    assert summary_json(snapshot, capsys) == fresh
    assert main(["summary", str(snapshot)]) == 0
    assert "events" in capsys.readouterr().out


# -- 4: links and who owns the folder ----------------------------------------------------------

def test_an_entry_that_is_a_link_is_neither_read_nor_written_through(
        snapshot, other_snapshot, isolated_cache, tmp_path, capsys):
    load_trace(other_snapshot)
    foreign = isolated_cache / cache.key_of(other_snapshot).folder
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    before_foreign = sorted(p.name for p in foreign.iterdir())
    # my entry's name, pointing at another capture's entry, then at an outside folder
    mine = isolated_cache / cache.key_of(snapshot).folder
    for target in (foreign, elsewhere):
        if mine.is_symlink():
            mine.unlink()
        elif mine.exists():
            shutil.rmtree(mine)  # the real entry the last summary wrote
        mine.symlink_to(target, target_is_directory=True)
        assert cache.lookup(cache.key_of(snapshot)) is None
        assert not mine.is_symlink()  # the link was removed, not followed
        mine.symlink_to(target, target_is_directory=True)
        fresh = summary_json(snapshot, capsys, "--no-cache")
        assert summary_json(snapshot, capsys) == fresh
    assert list(elsewhere.iterdir()) == []
    assert sorted(p.name for p in foreign.iterdir()) == before_foreign


def test_a_file_of_an_entry_that_is_a_link_is_not_followed(snapshot, isolated_cache, tmp_path):
    load_trace(snapshot)
    entry = only_entry(isolated_cache)
    outside = tmp_path / "outside.arrow"
    shutil.copy(entry / "events.arrow", outside)
    (entry / "events.arrow").unlink()
    (entry / "events.arrow").symlink_to(outside)
    assert cache.lookup(cache.key_of(snapshot)) is None


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o722])
def test_a_cache_folder_writable_by_others_is_not_used(snapshot, isolated_cache, capsys, mode):
    isolated_cache.mkdir(parents=True)
    isolated_cache.chmod(mode)
    cache._warned.clear()
    assert load_trace(snapshot) is not None
    assert list(isolated_cache.iterdir()) == []
    assert "writable by other users: not used" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() != 0, reason="handing a folder to another user needs root")
def test_a_cache_folder_owned_by_another_user_is_not_used(snapshot, isolated_cache, capsys):
    isolated_cache.mkdir(parents=True, mode=0o700)
    os.chown(isolated_cache, 65534, 65534)
    cache._warned.clear()
    load_trace(snapshot)
    assert list(isolated_cache.iterdir()) == []
    assert "owned by another user" in capsys.readouterr().err


def test_the_cache_folder_is_created_private(snapshot, isolated_cache):
    load_trace(snapshot)
    assert isolated_cache.stat().st_mode & 0o077 == 0


# -- 14, 16: a full disk, a clear that cannot, the cap --------------------------------------

def test_a_full_disk_leaves_no_partial_entry_and_says_so(snapshot, isolated_cache, monkeypatch,
                                                         capsys):
    real = pl.DataFrame.write_ipc
    calls = {"n": 0}

    def full_after_two(self, file, **kwargs):
        calls["n"] += 1
        if calls["n"] > 2:  # part of it got out (written through the cache's writer)
            part = b"\0" * 100
            file.write(part) if hasattr(file, "write") else Path(file).write_bytes(part)
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, file, **kwargs)

    monkeypatch.setattr(pl.DataFrame, "write_ipc", full_after_two)
    cache._warned.clear()
    trace = load_trace(snapshot)
    assert trace.events.height > 0
    assert list(isolated_cache.iterdir()) == []  # no .tmp-* folder, no entry
    assert "no space left" in capsys.readouterr().err


def test_a_full_disk_while_keeping_levels_leaves_no_temporary_file(snapshot, isolated_cache,
                                                                   monkeypatch):
    load_trace(snapshot)
    entry = only_entry(isolated_cache)
    for file in entry.glob("level-*"):
        file.unlink()

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cache.os, "replace", no_space)
    assert not cache.store_levels(cache.key_of(snapshot), load_trace(snapshot, use_cache=False))
    assert [p.name for p in entry.iterdir() if p.name.startswith(".tmp-")] == []


def test_cache_clear_says_what_it_could_not_remove(snapshot, isolated_cache, monkeypatch,
                                                   capsys):
    load_trace(snapshot)
    monkeypatch.setattr(cache.shutil, "rmtree", lambda *a, **k: None)  # as without permission
    assert main(["cache", "clear"]) == 2
    captured = capsys.readouterr()
    assert captured.out.startswith("cleared 0 entries (0.0 MB)")
    assert "could not remove 1 entry" in captured.err
    assert "Traceback" not in captured.err


@pytest.mark.parametrize(("text", "cap"), [("5GB", 5 * 10**9), ("1e9", 10**9),
                                           ("512MiB", 512 << 20), (" 2.5 GiB ", int(2.5 * 2**30)),
                                           ("123", 123)])
def test_the_cap_accepts_sizes_as_the_cli_does(monkeypatch, text, cap):
    monkeypatch.setenv("MEMTUI_CACHE_MAX_BYTES", text)
    assert cache.max_bytes() == cap


def test_an_unreadable_cap_warns_and_keeps_the_default(monkeypatch, capsys):
    monkeypatch.setenv("MEMTUI_CACHE_MAX_BYTES", "lots")
    cache._warned.clear()
    assert cache.max_bytes() == cache.DEFAULT_MAX_BYTES
    assert "MEMTUI_CACHE_MAX_BYTES='lots' is not a size" in capsys.readouterr().err


def test_figures_of_a_reopen_equal_a_fresh_read(snapshot, isolated_cache):
    fresh = summary(load_trace(snapshot, use_cache=False))
    load_trace(snapshot)
    assert summary(load_trace(snapshot)) == fresh
