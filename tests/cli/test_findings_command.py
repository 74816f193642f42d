"""``memtui findings`` and the findings counts of ``memtui summary --json``."""

from __future__ import annotations

import json

from memtui.analysis.summary import summary
from memtui.cli import main
from tests.conftest import REPO
from tests.helpers.findings_traces import MiB, TraceBuilder


def test_findings_command_json(tmp_path, capsys):
    demo = REPO / "snapshots" / "demo_oom.pickle"
    assert main(["findings", str(demo), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)  # exactly one object
    assert data["devices"][0]["findings"][0]["kind"] == "oom"
    assert main(["findings", str(demo)]) == 0
    text = capsys.readouterr().out
    assert "[high] oom: out of memory asking" in text
    bad = tmp_path / "bad.pickle"
    bad.write_bytes(b"not a capture")
    assert main(["findings", str(bad)]) == 2
    assert capsys.readouterr().err.startswith(f"memtui: {bad}: ")


def test_summary_gains_peak_reserved_and_findings(capsys):
    b = TraceBuilder()
    b.segment(0x20_0000_0000, 100 * MiB)
    b.segment(0x30_0000_0000, 20 * MiB)
    block = b.alloc("forward", 10 * MiB, addr=0x20_0000_0000)
    b.free(block)
    (device,) = summary(b.build())["devices"]
    assert device["peak_reserved_bytes"] == 120 * MiB
    assert device["findings"] == {"leak": 0, "peak": 1, "oom": 0, "fragmentation": 1,
                                  "inefficient": 0, "capture": 0, "savings": 0}


def test_findings_of_a_layered_capture_come_from_its_default_layer(capsys):
    """msMemScope: ``findings`` finds in each device's default memory layer, as ``summary``
    and the UI do; over all layers mixed, npu:0's largest free gap was 200 MiB in a pool
    of 18 MiB."""
    import pytest

    from memtui.analysis.findings import find_all
    from memtui.analysis.timeline.layers import layer_view
    from memtui.loading import load_trace
    from memtui.text.findings import format_findings
    from tests.conftest import shared_files

    found = shared_files("msmemscope", "msinsight_mirror__full_db__*.dat")
    if not found:
        pytest.skip("needs ../shared/data/msmemscope/msinsight_mirror__full_db__*.dat")
    assert main(["findings", str(found[0])]) == 0
    out = capsys.readouterr().out
    layered = layer_view(load_trace(found[0]))
    assert out.strip() == format_findings(layered, find_all(layered)).strip()
    assert "largest free gap then 200.0 MiB" not in out


def test_findings_stacks_prints_each_peak_group_with_its_full_stack(capsys):
    """``--stacks``: each of the peak's stack groups, then every frame of its commonest
    stack (innermost first, ``file:line:name``); the leak's evidence stack too."""
    demo = REPO / "snapshots" / "demo_training.pickle"
    assert main(["findings", str(demo), "--stacks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("        MLP.forward (model.py:150): 1.9 GiB (35%) in 12 blocks")
    assert lines[at + 1:at + 5] == ["          /work/model.py:150:MLP.forward",
                                    "          /work/model.py:172:Block.forward",
                                    "          /work/train.py:180:train",
                                    "          /work/train.py:212:<module>"]
    leak = next(i for i, line in enumerate(lines) if line.startswith("    [high] leak:"))
    assert lines[leak + 2] == ("        187 occurrences of 256.0 KiB, their spacing varies "
                               "by 4%, 74.4 MiB/s")
    assert lines[leak + 3:leak + 5] == ["        stack:",
                                        "          /work/train.py:195:log_metrics"]
    assert main(["findings", str(demo)]) == 0
    assert "/work/model.py:150:MLP.forward" not in capsys.readouterr().out  # only on asking
    assert main(["findings", str(demo), "--stacks", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    peak = next(f for f in data["devices"][0]["findings"] if f["kind"] == "peak")
    first = peak["detail"]["by_stack"][0]
    assert [f["name"] for f in first["stack"]] == ["MLP.forward", "Block.forward", "train",
                                                  "<module>"]
