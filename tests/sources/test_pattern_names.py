"""Paths are never patterns: a capture (and the reopen cache) under a name holding ``[``,
``]``, ``*`` or ``?`` opens as the same capture under a plain name (polars' readers take
a path for a glob unless told not to; ``run[1].csv`` then matched nothing)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from memtui.loading import load_trace
from memtui.sources import open_capture
from tests.helpers.memscope_files import write_text
from tests.helpers.profiler_folders import hand_profiler_folder
from tests.sources.test_memscope_csv import OLD_CSV

ODD = "run[1]*?"
FRAMES = ("events", "blocks", "segments", "markers")


def _same(a, b) -> None:
    for name in FRAMES:
        assert getattr(a, name).equals(getattr(b, name)), name


def _dump_csv(path: Path) -> Path:
    """A small msMemScope dump CSV (tests/sources/test_memscope_csv.py's old layout)."""
    return write_text(path, OLD_CSV)


def test_an_msmemscope_csv_named_like_a_pattern_opens(tmp_path):
    plain = _dump_csv(tmp_path / "memscope_dump_1.csv")
    odd_folder = tmp_path / ODD
    odd_folder.mkdir()
    odd = shutil.copy(plain, odd_folder / f"memscope_dump_{ODD}.csv")
    trace = open_capture(odd)
    assert trace.blocks.height > 0
    _same(trace, open_capture(plain))


def test_a_profiler_folder_named_like_a_pattern_opens(tmp_path):
    plain = hand_profiler_folder(tmp_path / "plain")
    odd = shutil.copytree(plain, tmp_path / ODD / "hand_ascend_pt")
    trace = open_capture(odd)
    assert trace.events.height > 0
    _same(trace, open_capture(plain))


def test_a_cache_under_a_pattern_name_reopens(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / ODD))
    capture = _dump_csv(tmp_path / "memscope_dump_1.csv")
    first = load_trace(capture)
    again = load_trace(capture)
    assert again.meta.cache_key is not None
    assert any((tmp_path / ODD / "memtui").iterdir())
    _same(first, again)


@pytest.mark.parametrize("name", ["[", "]", "*", "?", "a[b]c"])
def test_each_pattern_character_alone(tmp_path, name):
    plain = _dump_csv(tmp_path / "memscope_dump_1.csv")
    odd = shutil.copy(plain, tmp_path / f"memscope_dump_{name}.csv")
    _same(open_capture(odd), open_capture(plain))
