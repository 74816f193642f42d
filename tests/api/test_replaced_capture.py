"""Issue 31 item 1: a Capture keeps the cache key of the file it read, taken once at open.

A notebook holds ``c = memtui.open(P)`` on a leaking capture; a job writes an OOM capture
over ``P``; ``memtui state P`` stores the new file's entry; ``c.findings()`` must then keep
the *old* trace's findings nowhere but beside the old file's entry, so that ``memtui
findings P`` reports the new file's OOM and ``memtui check P --allow-oom`` gives the verdict
``--no-cache`` gives.  The same after ``os.chdir`` with a relative path, and for the
summary the Capture keeps.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

import memtui
from memtui.cli import main
from tests.conftest import REPO

LEAK = REPO / "tests" / "data" / "cuda_train_leak.pickle"
OOM = REPO / "tests" / "data" / "cuda_oom_full.pickle"


def kinds(capsys, *argv) -> set[str]:
    assert main(["findings", *map(str, argv), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    return {f["kind"] for d in data["devices"] for f in d["findings"]}


def verdict(capsys, *argv) -> int:
    code = main(["check", *map(str, argv)])
    capsys.readouterr()
    return code


@pytest.fixture
def room(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    return tmp_path


def test_the_truths_the_test_relies_on(capsys, room):
    """The leaking capture has a leak and no OOM, the OOM capture an OOM and no leak."""
    assert "leak" in kinds(capsys, LEAK) and "oom" not in kinds(capsys, LEAK)
    assert "oom" in kinds(capsys, OOM) and "leak" not in kinds(capsys, OOM)


def test_a_replaced_capture_answers_with_its_own_findings(capsys, room):
    path = room / "run.pickle"
    shutil.copyfile(LEAK, path)
    held = memtui.open(path)
    shutil.copyfile(OOM, path)  # the job writes its next capture over it
    assert main(["state", str(path)]) == 0  # the new file's cache entry is written
    capsys.readouterr()
    old = {f.kind for f in held.findings().all()}
    assert "leak" in old and "oom" not in old  # the capture answers for what it read
    assert held.summary().device(held.devices[0]).findings.get("leak")

    assert "oom" in kinds(capsys, path) and "leak" not in kinds(capsys, path)
    fresh = verdict(capsys, path, "--allow-oom", "--no-cache")
    assert verdict(capsys, path, "--allow-oom") == fresh == 0


def test_a_relative_path_after_chdir(capsys, room):
    (room / "a").mkdir()
    (room / "b").mkdir()
    shutil.copyfile(LEAK, room / "a" / "run.pickle")
    shutil.copyfile(OOM, room / "b" / "run.pickle")
    os.chdir(room / "a")
    held = memtui.open("run.pickle")
    os.chdir(room / "b")
    assert main(["state", "run.pickle"]) == 0
    capsys.readouterr()
    assert "leak" in {f.kind for f in held.findings().all()}
    assert "leak" not in kinds(capsys, "run.pickle")
    assert verdict(capsys, "run.pickle", "--allow-oom") == 0


def test_the_key_is_taken_once_at_open(room, monkeypatch):
    """Nothing computes the path's key again after the open (the key is the trace's)."""
    from memtui import cache

    path = room / "run.pickle"
    shutil.copyfile(LEAK, path)
    held = memtui.open(path)
    assert held.trace.meta.cache_key == cache.key_of(path) is not None

    def no_second_key(*_args):
        raise AssertionError("the key was computed again after the open")

    monkeypatch.setattr(cache, "key_of", no_second_key)
    held.findings()
    held.summary()


def test_a_file_that_changes_while_read_is_not_kept(room, monkeypatch):
    """Its key before the read differs from its key after: neither stored nor keyed."""
    from memtui import cache, loading

    path = room / "run.pickle"
    shutil.copyfile(LEAK, path)
    real_open = loading.open_capture

    def open_then_replace(p, progress=None, preview=None):
        trace = real_open(p, progress, preview)
        shutil.copyfile(OOM, path)  # written while it was being read
        return trace

    monkeypatch.setattr(loading, "open_capture", open_then_replace)
    held = memtui.open(path)
    assert held.trace.meta.cache_key is None
    assert cache.usage()[0] == 0
