"""``memtui --version`` and ``memtui cache info`` say which snapshot reader is in use
(issue 25), without importing a capture's libraries."""

from __future__ import annotations

import pytest

from memtui.sources.torch_snapshot import reader_choice
from tests.cli.test_light_imports import imported_by


@pytest.mark.parametrize("argv", [["--version"], ["cache", "info"]])
@pytest.mark.parametrize("pure", ["0", "1"])
def test_reader_line(argv, pure, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv(reader_choice.PURE_PYTHON_ENV, pure)
    got = imported_by(*argv)
    assert got["status"] == 0
    if not reader_choice.compiled_available():
        expected = "snapshot reader: Python (the compiled reader was not built)"
    elif pure == "1":
        expected = "snapshot reader: Python (MEMTUI_PURE_PYTHON is set)"
    else:
        expected = "snapshot reader: compiled (C), the Python reader where a file needs it"
    assert expected in got["out"].splitlines()
    assert got["heavy"] == []


@pytest.mark.parametrize("argv", [["--version"], ["cache", "info"]])
@pytest.mark.parametrize("pure", ["0", "1"])
def test_replay_line(argv, pure, monkeypatch, tmp_path):
    """Which loop the what-if replay runs (issue 34), said as lightly."""
    from memtui.analysis.replay import compiled

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv(compiled.PURE_PYTHON_ENV, pure)
    got = imported_by(*argv)
    assert got["status"] == 0
    if compiled.REPLAY_CORE is None:
        expected = "what-if replay: Python (the compiled core was not built)"
    elif pure == "1":
        expected = "what-if replay: Python (MEMTUI_PURE_PYTHON is set)"
    else:
        expected = "what-if replay: compiled (C)"
    assert expected in got["out"].splitlines()
    assert got["heavy"] == []
