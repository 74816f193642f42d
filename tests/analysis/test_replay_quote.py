"""The findings' what-if hook: an OOM finding of a capture whose replay is proven quotes the
predicted effect of the setting it recommends; elsewhere the general advice stays."""

from __future__ import annotations

from pathlib import Path

from memtui.analysis.findings import find_all, quote
from memtui.loading import load_trace
from tests.conftest import REPO

H100 = Path(__file__).resolve().parents[1] / "data"


def oom_finding(path: Path):
    findings = find_all(load_trace(path, use_cache=False))
    return next(f for f in findings["cuda:0"] if f.kind == "oom")


def test_proven_oom_quotes_the_predicted_effect():
    # cuda_oom_fragmented (H100): the OOM finding recommends expandable_segments:True; the
    # replay is proven on the capture and predicts the OOM avoided
    finding = oom_finding(H100 / "cuda_oom_fragmented.pickle")
    advice = finding.detail["advice"]
    assert advice.startswith("set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: a replay")
    assert "1 of the 1 recorded OOMs is avoided" in advice
    assert "grow in place" in finding.detail["general_advice"]
    assert finding.detail["predicted_saving_bytes"] == 100 << 20


def test_unproven_capture_keeps_the_general_advice():
    # the demo is written by a simplified allocator: the replay departs, so no quote
    finding = oom_finding(REPO / "snapshots" / "demo_oom.pickle")
    assert finding.detail["advice"].startswith("set PYTORCH_CUDA_ALLOC_CONF=expandable")
    assert "a replay" not in finding.detail["advice"]
    assert finding.detail["replay"].startswith("not proven")


def test_large_devices_are_left_alone(monkeypatch):
    monkeypatch.setattr(quote, "QUOTE_MAX_EVENTS", 10)
    finding = oom_finding(H100 / "cuda_oom_fragmented.pickle")
    assert "a replay" not in finding.detail["advice"]
    assert "general_advice" not in finding.detail and "replay" not in finding.detail


def test_advice_without_a_setting_gets_no_quote():
    # a full device: the advice names no allocator setting
    finding = oom_finding(H100 / "cuda_oom_full.pickle")
    assert quote.recommended_setting(finding) is None
    assert "general_advice" not in finding.detail


def test_fragmentation_advice_quotes_the_prediction():
    # t26 ctx512: the fragmentation finding advises expandable segments; the replay is
    # proven on the capture and predicts the reserved peak from 58.5 GiB to 52.0 GiB
    from tests.conftest import require_shared

    folder = require_shared("torch_snapshots")
    findings = find_all(load_trace(folder / "t26_cs336_kk_ctx512_fullstep.pickle",
                                   use_cache=False))
    fragmentation = next(f for f in findings["cuda:0"] if f.kind == "fragmentation")
    advice = fragmentation.detail["advice"]
    assert advice.startswith("set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: a replay")
    assert "from 58.5 GiB to 52.0 GiB" in advice
    assert fragmentation.detail["predicted_saving_bytes"] == 62830673920 - 55834574848
    assert "expandable_segments:True" in fragmentation.detail["general_advice"]


def test_fragmentation_without_advice_gets_the_expandable_prediction():
    from memtui.analysis.findings.model import Finding

    trace = load_trace(H100 / "cuda_train_leak.pickle", use_cache=False)
    finding = Finding(kind="fragmentation", severity="low", title="t", device="cuda:0",
                      detail={"advice": None})
    quoted = quote.quote_predictions(trace, {"cuda:0": [finding]})["cuda:0"][0]
    # train.py 8 under expandable segments: 270 MiB -> 286 MiB (checked against the H100
    # run recorded with the setting): it would not help
    assert quoted.detail["advice"].startswith("expandable_segments:True would not help here")
    assert quoted.detail["predicted_saving_bytes"] == -16 * (1 << 20)


def test_a_setting_that_does_not_help_is_not_advised(monkeypatch):
    # force the quote of a setting the replay predicts to raise the peak: roundup to 4
    # divisions on cuda_train_leak; the advice says it would not help
    from memtui.analysis.findings.model import Finding

    trace = load_trace(H100 / "cuda_train_leak.pickle", use_cache=False)
    finding = Finding(kind="fragmentation", severity="medium", title="t", device="cuda:0",
                      detail={"advice": "set PYTORCH_CUDA_ALLOC_CONF="
                                        "roundup_power2_divisions:4 to round"})
    quoted = quote.quote_predictions(trace, {"cuda:0": [finding]})["cuda:0"][0]
    assert quoted.detail["advice"].startswith("roundup_power2_divisions:4 would not help here")
