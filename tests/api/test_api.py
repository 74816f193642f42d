"""The Python API (issue 24): ``memtui.open``, ``memtui.compare``, typed results whose
``to_dict()`` is the CLI's ``--json``, and the README's example, run as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import polars as pl
import pytest

import memtui
from memtui.cli import main
from tests.conftest import REPO
from tests.helpers.compare_traces import MiB, write_loop
from tests.helpers.hand_snapshot import write_hand_snapshot

DEMO = REPO / "snapshots" / "demo_training.pickle"


def cli_json(capsys, *argv) -> dict:
    assert main([*map(str, argv), "--json"]) in (0, 1)
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def hand(tmp_path):
    return write_hand_snapshot(tmp_path / "hand.pickle")


def test_import_memtui_is_light_and_all_is_the_surface():
    probe = ("import sys, json, memtui; heavy = sorted({'polars', 'numpy', 'pyarrow', "
             "'textual'} & set(sys.modules)); cap = memtui.open; "
             "print(json.dumps([heavy, sorted(memtui.__all__)]))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                          text=True, check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    heavy, names = json.loads(done.stdout)
    assert heavy == []
    assert {"open", "compare", "Capture", "CheckResult", "Limits", "parse_size"} <= set(names)
    for name in memtui.__all__:
        assert getattr(memtui, name) is not None
    with pytest.raises(AttributeError):
        memtui.load_trace  # noqa: B018  (private: not on the surface)


def test_the_package_ships_py_typed():
    import tomllib

    assert (REPO / "memtui" / "py.typed").is_file()
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["memtui"]


def test_frames_of_a_hand_snapshot(hand):
    cap = memtui.open(hand)
    assert cap.devices == ["cuda:0"] and cap.source == "torch_snapshot"
    events = cap.events("cuda:0")
    assert isinstance(events, pl.DataFrame)
    # the 11 trace entries; free_requested + free_completed pairs stay two events each
    assert events.height == 11
    assert events.filter(pl.col("action") == "oom")["size"].to_list() == [2048]
    blocks = cap.blocks("cuda:0")
    alive = blocks.filter(pl.col("t_free").is_null())
    assert sorted(alive["size"].to_list()) == [512, 512, 1024, 1024]  # b3, b4, b1, g2
    assert cap.events().height == events.height  # one device: all of them
    with pytest.raises(memtui.CaptureError, match="no device 'cuda:7'"):
        cap.events("cuda:7")


def test_summary_findings_state_are_the_cli_json(hand, capsys):
    cap = memtui.open(hand)
    summary = cap.summary()
    assert summary.to_dict() == cli_json(capsys, "summary", hand)
    assert summary.devices[0].peak_allocated_bytes == 4096  # 3072 + the 1024 ghost g2
    assert summary.device("cuda:0").findings["oom"] == 1
    found = cap.findings()
    assert found.to_dict() == cli_json(capsys, "findings", hand)
    assert [f.kind for f in found.of_kind("oom")] == ["oom"]
    assert found.all()[0].severity == "high"
    state = cap.state(event=9)
    assert state.to_dict() == cli_json(capsys, "state", hand, "--event", "9")
    assert (state.event, state.level["allocated"], state.largest_gap_bytes) == (9, 3072, 1536)
    assert cap.state(event="peak").to_dict() == cli_json(capsys, "state", hand, "--event",
                                                         "peak")
    assert "after event #9" in state.text()
    with pytest.raises(memtui.CaptureError, match="outside"):
        cap.state(event=99)


def test_compare_and_check_are_the_cli_json(tmp_path, capsys):
    a = write_loop(tmp_path / "a.pickle", steps=6)
    b = write_loop(tmp_path / "b.pickle", steps=6, forward=5 * MiB)
    result = memtui.compare(a, b)
    assert result.to_dict() == cli_json(capsys, "compare", a, b)
    assert result.devices[0].a.peak == 6 * MiB and result.devices[0].b.peak == 7 * MiB
    assert memtui.compare(memtui.open(a), b).to_dict() == result.to_dict()
    check = memtui.open(b).check(a, max_peak="8 MiB")
    assert isinstance(check, memtui.CheckResult)
    assert check.to_dict() == cli_json(capsys, "check", b, "--baseline", a,
                                       "--max-peak", "8MiB")
    assert not check.passed and [r.limit for r in check.broken] == ["baseline_peak"]
    assert check.broken[0].figure == 7 * MiB
    assert memtui.open(b).check(a, tolerance=20).passed
    with pytest.raises(memtui.CaptureError, match="not a size"):
        memtui.open(b).check(max_peak="a lot")


def test_bad_input_raises_the_one_capture_error(tmp_path):
    bad = tmp_path / "bad.pickle"
    bad.write_bytes(b"not a pickle at all")
    with pytest.raises(memtui.CaptureError) as caught:
        memtui.open(bad)
    assert str(caught.value).startswith(str(bad))


def readme_example() -> str:
    text = (REPO / "README.md").read_text()
    found = re.search(r"<!-- api-example[^>]*-->\s*```python\n(.*?)```", text, re.S)
    assert found, "README.md has no api-example block"
    return found.group(1)


def test_the_readme_example_runs_as_written():
    code = readme_example()
    lines = [line for line in code.splitlines() if line.strip()]
    assert len(lines) <= 5
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    # each print's expected output is the comment at the end of its line
    expected = [line.split("# ", 1)[1] for line in lines if line.startswith("print(")]
    assert printed == expected
