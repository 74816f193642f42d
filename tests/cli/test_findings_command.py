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
                                  "inefficient": 0, "capture": 0}


def test_findings_of_a_layered_capture_come_from_its_default_layer(capsys):
    """msMemScope: ``findings`` finds in each device's default memory layer, as ``summary``
    and the UI do; over all layers mixed, npu:0's largest free gap was 200 MiB in a pool
    of 18 MiB."""
    import pytest

    from memtui.analysis.findings import find_all, format_findings
    from memtui.analysis.layers import layer_view
    from memtui.loading import load_trace
    from tests.conftest import shared_files

    found = shared_files("msmemscope", "msinsight_mirror__full_db__*.dat")
    if not found:
        pytest.skip("needs ../shared/data/msmemscope/msinsight_mirror__full_db__*.dat")
    assert main(["findings", str(found[0])]) == 0
    out = capsys.readouterr().out
    layered = layer_view(load_trace(found[0]))
    assert out.strip() == format_findings(layered, find_all(layered)).strip()
    assert "largest free gap then 200.0 MiB" not in out
