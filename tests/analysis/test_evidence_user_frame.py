"""Evidence a person acts on (issue 33, item 4): the peak's evidence is what holds the
bytes, named by the innermost user frame, on every real capture at hand.

``memtui check`` with a limit every capture breaks gives, per device, the evidence of
the peak: its first frame must be the user's code wherever the capture holds a block
alive at the peak whose allocation stack has a user frame (a ``.py`` file outside torch,
site-packages and the interpreter), and no frame of it may be an allocator internal or a
deallocation (``THPVariable_clear``, ``THPVariable_dealloc``).  The same frames reach the
report, the Perfetto args and ``findings --stacks``: they all read ``Evidence.stack``.
"""

from __future__ import annotations

import polars as pl
import pytest

import memtui
from memtui.analysis.findings.frames import evidence_stack
from memtui.analysis.findings.peak import find_peak
from memtui.analysis.stacks.callstack import user_frame
from memtui.text.findings import format_findings
from tests.conftest import REPO, shared_files
from tests.helpers.findings_traces import DEVICE, MiB, TraceBuilder

NEVER = ("CUDACachingAllocator", "getNewWorkspace", "THPVariable_clear",
         "THPVariable_dealloc", "c10::", "unwind::")
REAL = [*shared_files("torch_snapshots", "*.pickle"), *shared_files("torch_snapshots", "*.pkl"),
        *shared_files("msmemscope", "*.db"), *shared_files("msmemscope", "*.csv"),
        *sorted((REPO / "tests" / "data").glob("*.pickle"))]


def _user_stack_alive_at_peak(capture: memtui.Capture, device: str) -> bool:
    """Whether a block alive at the peak (not one from before the capture freed in it:
    its stack is its free's) has a user frame anywhere in its allocation stack."""
    trace = capture.view()
    (peak,) = find_peak(trace, device)
    blocks = trace.device_blocks(device).filter(
        pl.col("block_id").is_in(_alive_ids(trace, device, peak))
        & ~(pl.col("ghost").fill_null(False) & pl.col("t_free").is_not_null()))
    ids = blocks["stack_id"].drop_nulls().to_list()
    stacks = trace.stacks.filter(pl.col("stack_id").is_in(ids))
    frame_ids = stacks.explode("frame_ids")["frame_ids"].drop_nulls()
    frames = trace.frames.filter(pl.col("frame_id").is_in(frame_ids.to_list()))
    return frames.select(user_frame().fill_null(False).any()).item()


def _alive_ids(trace, device, peak) -> list[int]:
    from memtui.analysis.timeline.live import device_index

    index = device_index(trace, device)
    rows = index.blocks_at(peak.detail["peak_t"])
    return index.blocks[rows]["block_id"].to_list()


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_check_names_the_peak_by_the_users_code(path):
    capture = memtui.open(path, use_cache=False)
    verdict = capture.check(max_peak=0).to_dict()
    for result in verdict["results"]:
        if result["limit"] != "max_peak" or result["status"] != "fail":
            continue
        stack = result["evidence"].get("stack") or []
        names = " ".join(f"{f['name']} {f['filename']}" for f in stack)
        assert not any(bad in names for bad in NEVER), (result["device"], stack)
        if _user_stack_alive_at_peak(capture, result["device"]):
            first = pl.DataFrame([stack[0]]) if stack else None
            assert first is not None and first.select(user_frame()).item(), (
                result["device"], stack[:3])
            assert result["evidence"]["held_by"], result["evidence"]


def test_check_on_a_real_full_step_names_the_optimizer_line(capsys, monkeypatch, tmp_path):
    """The issue's command: before, ``stack: at::cuda::getNewWorkspace() (?:0) <-
    at::cuda::getCurrentCUDABlasHandle() ...``; now the user's optimizer line, the groups
    holding most, and a GitHub annotation on that file where the workspace holds it."""
    from memtui.cli import main

    (path,) = shared_files("torch_snapshots", "t26_cs336_kk_ctx512_fullstep.pickle") or [None]
    if path is None:
        pytest.skip("../shared/data is absent: the real captures live beside the checkout")
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    junit = tmp_path / "check.xml"
    assert main(["check", str(path), "--max-peak", "40GiB", "--junit", str(junit)]) == 1
    out = capsys.readouterr().out
    assert "getNewWorkspace" not in out and "getCurrentCUDABlasHandle" not in out
    stack_line = next(line for line in out.splitlines() if "stack" in line)
    assert stack_line.strip().startswith(
        "stack: step (/home/c-kaitwang/assignment1/cs336_basics/optimizers.py:82)")
    assert "held most by alive before the capture 12.9 GiB (25%); step (optimizers.py:82)" \
        in out
    assert "getNewWorkspace" not in junit.read_text()
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", "/home/c-kaitwang/assignment1")
    main(["check", str(path), "--max-peak", "40GiB"])
    error = next(line for line in capsys.readouterr().out.splitlines()
                 if line.startswith("::error "))
    assert error.startswith("::error file=cs336_basics/optimizers.py,line=82,")


@pytest.mark.parametrize("name", ["t26_cs336_kk_ctx512_fullstep.pickle",
                                  "t26_bcrafton_memory_snapshot.pickle"])
def test_the_report_and_perfetto_carry_the_same_evidence(name, tmp_path):
    """The HTML report's and the Perfetto trace's stacks are the findings' evidence: no
    workspace, no deallocation, the user's line first."""
    from memtui.analysis.findings import find_all
    from memtui.export.perfetto import export_perfetto
    from memtui.export.report import finding_html

    found = shared_files("torch_snapshots", name)
    if not found:
        pytest.skip("../shared/data is absent: the real captures live beside the checkout")
    trace = memtui.open(found[0], use_cache=False).view()
    findings = find_all(trace, what_if=False)
    html = "".join(finding_html(f, trace) for f in findings["cuda:0"])
    out = tmp_path / "trace.json"
    export_perfetto(trace, findings, out)
    for text in (html, out.read_text()):
        assert not any(bad in text for bad in NEVER)
    peak = next(f for f in findings["cuda:0"] if f.kind == "peak")
    assert pl.DataFrame([peak.evidence.stack[0].to_json()]).select(user_frame()).item()


def test_the_peaks_title_leads_with_code_not_with_blocks_without_a_stack():
    """cuda_moe_leak: 34.0 MiB of blocks without a stack (the autograd thread under
    Python-only stacks) held most; the title named "(no stack recorded)" first."""
    capture = memtui.open(REPO / "tests" / "data" / "cuda_moe_leak.pickle", use_cache=False)
    (peak,) = capture.findings().of_kind("peak")
    assert "allocated: forward (moe_leak.py:45) holds 33.0 MiB (35%), 34.0 MiB (36%) " \
        "with no stack recorded" in peak.title


def test_real_captures_are_here():
    if not shared_files("torch_snapshots"):
        pytest.skip("../shared/data is absent: the real captures live beside the checkout")
    assert len(REAL) >= 20


def _cpp_then_user() -> TraceBuilder:
    """A block whose stack is an allocator workspace inside a user line, and one from
    before the capture freed by ``THPVariable_dealloc``."""
    b = TraceBuilder()
    b.alloc("work", 8 * MiB)
    b.alloc("alive", 32 * MiB)
    b.ghost_free(64 * MiB, stack="ghostly")
    return b


def test_the_evidence_starts_at_the_user_frame():
    """A stack ``getNewWorkspace <- gemm <- user line <- main``: the evidence is the user
    line outward; the full stack keeps every frame."""
    b = _cpp_then_user()
    trace = b.build()
    internal = pl.DataFrame({"frame_id": [90, 91], "filename": ["", ""], "line": [0, 0],
                             "name": ["at::cuda::getNewWorkspace()", "at::native::linear"]})
    frames = pl.concat([trace.frames, internal.cast(trace.frames.schema)])
    alive_stack = b.stack_names["alive"]
    stacks = trace.stacks.with_columns(frame_ids=pl.when(pl.col("stack_id") == alive_stack)
                                       .then(pl.concat_list(pl.lit([90, 91], dtype=pl.List(
                                           pl.Int32)), "frame_ids"))
                                       .otherwise("frame_ids"))
    import dataclasses

    trace = dataclasses.replace(trace, frames=frames, stacks=stacks)
    stack = evidence_stack(trace, alive_stack)
    assert [f.name for f in stack] == ["alive", "train"]
    (peak,) = find_peak(trace, DEVICE)
    assert [f.name for f in peak.evidence.stack] == ["alive", "train"]
    text = format_findings(trace, {DEVICE: [peak]}, stacks=True)
    assert "getNewWorkspace" not in text and "at::native::linear" not in text
    assert "/work/alive.py:" in text


def test_a_block_freed_by_a_dealloc_is_never_the_peaks_evidence():
    """The 64 MiB from before the capture hold most at the start, but their stack is the
    one of their free: the evidence is the largest group a user line allocated."""
    trace = _cpp_then_user().build()
    (peak,) = find_peak(trace, DEVICE)
    assert peak.detail["by_stack"][0]["label"] == "alive before the capture"
    assert peak.evidence.stack[0].name == "alive"
    assert peak.detail["evidence_group"] == "alive (alive.py:11)"
    rows = {r["label"]: r for r in peak.detail["by_stack"]}
    assert rows["alive before the capture"].get("stack_id") is None
