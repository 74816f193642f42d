"""The command's process tells its allocators to give memory back (memtui.process_memory):
set before numpy and polars load, never over the user's own settings, never passed on to
a program the command runs, and never in a program that imports memtui."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from memtui import process_memory
from memtui.commands.record import child_environment

REPO = Path(__file__).resolve().parents[2]
NAMES = tuple(process_memory.SETTINGS)

#: Runs the command's entry on ARGV, and prints what the environment held at exit, and
#: what numpy was told about huge pages.
_PROBE = """
import atexit, json, os, sys
def report():
    import numpy
    print(json.dumps({"env": {n: os.environ.get(n) for n in NAMES},
                      "hugepage": bool(numpy._core.multiarray._get_madvise_hugepage())}))
atexit.register(report)
sys.argv = ["memtui", *sys.argv[1:]]
from memtui.cli import entry
entry()
"""


def _probe(*argv: str, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in NAMES}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.replace("NAMES", repr(NAMES)), *argv],
        cwd=REPO, env={**clean, "PYTHONPATH": str(REPO), **env}, capture_output=True,
        text=True, check=False)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_command_sets_them_before_the_libraries_load():
    got = _probe("--version")
    assert got["env"] == process_memory.SETTINGS
    assert got["hugepage"] is False  # numpy read the setting when it loaded


def test_the_users_own_settings_are_kept():
    got = _probe("--version", _RJEM_MALLOC_CONF="narenas:1", NUMPY_MADVISE_HUGEPAGE="1")
    assert got["env"] == {"_RJEM_MALLOC_CONF": "narenas:1", "NUMPY_MADVISE_HUGEPAGE": "1"}
    assert got["hugepage"] is True


def test_polars_own_default_left_by_a_parent_is_not_the_users():
    """A process that loaded polars (a notebook, a benchmark) leaves polars' default in
    the environment of what it starts: the command still sets its own."""
    got = _probe("--version", _RJEM_MALLOC_CONF="dirty_decay_ms:500,muzzy_decay_ms:1000")
    assert got["env"] == process_memory.SETTINGS


def test_a_program_importing_memtui_is_left_alone():
    clean = {k: v for k, v in os.environ.items() if k not in NAMES}
    code = ("import json, os, memtui; memtui.open; import memtui.api; "
            f"print(json.dumps({{n: os.environ.get(n) for n in {NAMES!r}}}))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          env={**clean, "PYTHONPATH": str(REPO)}, text=True, check=True)
    assert json.loads(done.stdout) == dict.fromkeys(NAMES)


def test_apply_sets_nothing_once_the_libraries_are_loaded(monkeypatch):
    import numpy  # noqa: F401 - loaded, as a program using memtui has them
    import polars  # noqa: F401

    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
    assert process_memory.apply() == {}
    assert all(name not in os.environ for name in NAMES)


def test_a_recorded_program_gets_the_users_environment(monkeypatch):
    monkeypatch.setattr(process_memory, "_SET", dict(process_memory.SETTINGS))
    monkeypatch.setenv("_RJEM_MALLOC_CONF", process_memory.SETTINGS["_RJEM_MALLOC_CONF"])
    monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", "1")  # changed since: the user's now
    env = child_environment("{}")
    assert "_RJEM_MALLOC_CONF" not in env
    assert env["NUMPY_MADVISE_HUGEPAGE"] == "1"
    assert process_memory.for_children({"A": "b"}) == {"A": "b"}
