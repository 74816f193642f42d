"""``memtui compare A B [--json]``: the issue's JSON shape, the report, the error rule."""

from __future__ import annotations

import json

import pytest

from memtui.cli import main
from tests.helpers.compare_traces import MiB, write_loop


@pytest.fixture(scope="module")
def pair_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("compare_cli")
    return {"clean": write_loop(folder / "clean.pickle"),
            "leak": write_loop(folder / "leak.pickle", leak=MiB)}



def test_json_is_one_object_of_the_issue_shape(pair_files, capsys):
    assert main(["compare", str(pair_files["clean"]), str(pair_files["leak"]), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["a"] == {"path": str(pair_files["clean"]), "source": "torch_snapshot"}
    assert data["b"]["source"] == "torch_snapshot"
    assert data["alignment"] == "step"
    [d] = data["devices"]
    assert {"device_a", "device_b", "peak_allocated", "peak_reserved", "end_allocated",
            "by_stack", "by_owner", "by_op", "steps"} <= set(d)
    assert {"label", "file", "line", "a_bytes", "b_bytes", "delta"} <= set(d["by_stack"][0])
    assert {"step", "a_peak", "b_peak", "delta"} == set(d["steps"][0])


def test_text_report_names_the_leak(pair_files, capsys):
    assert main(["compare", str(pair_files["clean"]), str(pair_files["leak"])]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    first = lines.index("  by stack (innermost user frame):") + 1
    assert "+4.0 MiB at end" in lines[first] and "log_metrics (train.py:60)" in lines[first]
    assert "(only in B)" in lines[first]


def test_an_op_launched_only_in_b_without_live_bytes_is_one_explained_line(capsys):
    """QA: randn, launched twice in the leaks run only, made two "0 -> 0 B (only in B)"
    rows; now one line saying it was launched and none of its bytes live at a peak/end."""
    from tests.conftest import require_shared

    folder = require_shared("msmemscope")
    assert main(["compare", str(folder / "example__compare__baseline.csv"),
                 str(folder / "example__compare__leaks.csv")]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "randn" in line]
    assert len(lines) == 1, lines
    assert "launched 0 -> 2 times, none of its bytes live at the peaks or ends" in lines[0]
    assert "(only in B)" in lines[0] and "0 B -> 0 B" not in lines[0]


def test_a_bad_file_is_one_line_and_status_2(pair_files, tmp_path, capsys):
    bad = tmp_path / "bad.pickle"
    bad.write_bytes(b"not a pickle at all")
    assert main(["compare", str(pair_files["clean"]), str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"memtui: {bad}:") and err.count("\n") == 1


def test_two_paths_open_compare_mode(pair_files, monkeypatch):
    import memtui.tui.compare_app as compare_app

    seen = []
    monkeypatch.setattr(compare_app, "run_compare", lambda a, b: seen.append((a, b)) or 0)
    assert main([str(pair_files["clean"]), str(pair_files["leak"])]) == 0
    assert seen == [(str(pair_files["clean"]), str(pair_files["leak"]))]


def test_a_key_with_the_same_change_at_peak_and_end_is_said_once():
    """Issue 23 point 9: a key whose bytes are the same at the peak and the end was printed
    twice with one delta; now once, ``at end and peak``.  A key that changed differently
    keeps its two lines."""
    import polars as pl

    from memtui.text.compare import _rows

    frame = pl.DataFrame({"label": ["kept", "kept", "grew", "grew"],
                          "at": ["end", "peak", "end", "peak"],
                          "a_bytes": [0, 0, MiB, 2 * MiB], "b_bytes": [5 * MiB, 5 * MiB, 3 * MiB,
                                                                       3 * MiB],
                          "delta": [5 * MiB, 5 * MiB, 2 * MiB, MiB],
                          "only_in": ["b", "b", None, None]})
    lines = _rows("by stack", frame, "label", top=10)
    kept = [line for line in lines if "kept" in line]
    assert kept == ["        +5.0 MiB at end and peak (0 B -> 5.0 MiB)  kept  (only in B)"]
    grew = [line for line in lines if "grew" in line]
    assert [line.split(" (")[0].strip() for line in grew] == ["+2.0 MiB at end",
                                                               "+1.0 MiB at peak"]
