"""Soak of the reopen cache: entries damaged at random (bit flips, truncation, files swapped
within an entry and between entries, files replaced by links), then reopened: the figures
must equal a fresh read (the damage was caught and the entry rebuilt), never a traceback,
never another capture's figures (issue 27, "Done when").

The short profile (CI) draws a fixed set of damages; ``MEMTUI_FUZZ_PROFILE=long`` soaks.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memtui import cache
from memtui.cli import main
from tests.fuzz.harness import FUZZ
from tests.helpers.hand_snapshot import write_hand_snapshot
from tests.helpers.live_captures import grown_snapshot

pytestmark = [pytest.mark.fuzz, pytest.mark.slow]

DAMAGES = ("flip", "truncate", "swap_inside", "swap_between", "link", "remove")


def summary_json(path: Path, capsys, *extra: str, command: str = "summary") -> dict:
    """``memtui COMMAND PATH --json EXTRA`` in this process."""
    try:
        code = main([command, str(path), "--json", *extra])
    finally:
        os.environ.pop(cache.NO_CACHE_ENV, None)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Traceback" not in captured.err
    return json.loads(captured.out)


def entry_files(entry: Path) -> list[Path]:
    return sorted(p for p in entry.iterdir()
                  if p.is_file() and not p.is_symlink() and not p.name.startswith("."))


def damage(entry: Path, other: Path, draw) -> str:
    """One random damage to one file of ``entry`` (``other``: another capture's entry)."""
    files = entry_files(entry)
    if not files:
        return "nothing left to damage"
    target = draw(st.sampled_from(files))
    kind = draw(st.sampled_from(DAMAGES))
    if kind == "flip":
        data = bytearray(target.read_bytes())
        if data:
            at = draw(st.integers(0, len(data) - 1))
            data[at] ^= 1 << draw(st.integers(0, 7))
            target.write_bytes(bytes(data))
    elif kind == "truncate":
        data = target.read_bytes()
        target.write_bytes(data[: draw(st.integers(0, max(len(data) - 1, 0)))])
    elif kind == "swap_inside":
        second = draw(st.sampled_from(files))
        a, b = target.read_bytes(), second.read_bytes()
        target.write_bytes(b)
        second.write_bytes(a)
    elif kind == "swap_between":
        theirs = other / target.name
        if theirs.is_file():
            shutil.copy(theirs, target)
    elif kind == "link":
        outside = entry.parent.parent / f"outside-{target.name}"
        shutil.copy(target, outside)
        target.unlink()
        target.symlink_to(outside)
    else:
        target.unlink()
    return f"{kind} {target.name}"


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    folder = tmp_path_factory.mktemp("soak")
    import pickle

    other = folder / "other.pickle"
    other.write_bytes(pickle.dumps(grown_snapshot(7), protocol=4))
    return write_hand_snapshot(folder / "hand.pickle"), other


@FUZZ
@given(data=st.data())
def test_a_damaged_entry_gives_a_fresh_reads_figures(captures, tmp_path_factory, capsys,
                                                     data):
    mine, theirs = captures
    root = tmp_path_factory.mktemp("xdg")
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(root)
    try:
        fresh = summary_json(mine, capsys, "--no-cache")
        os.environ[cache.NO_CACHE_ENV] = "1"
        fresh_state = summary_json(mine, capsys, "--event", "peak", command="state")
        summary_json(mine, capsys)  # the entry, with its summary and levels
        summary_json(theirs, capsys)
        entry = root / "memtui" / cache.key_of(mine).folder
        other = root / "memtui" / cache.key_of(theirs).folder
        for _ in range(data.draw(st.integers(1, 3))):
            damage(entry, other, data.draw)
        # state reads the trace and its levels; summary the kept figures
        assert summary_json(mine, capsys, "--event", "peak", command="state") == fresh_state
        assert summary_json(mine, capsys) == fresh
        assert summary_json(mine, capsys) == fresh  # and what was rebuilt holds
    finally:
        if old is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = old
