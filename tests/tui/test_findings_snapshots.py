"""SVG snapshots of the Findings screen on the demo capture, at 80x24 and 120x40.

Accept a deliberate change of looks with
``pytest tests/tui/test_findings_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import re

import polars as pl
import pytest

from memtui.analysis.findings import find_all, flat
from memtui.analysis.findings.model import ranked
from memtui.loading import load_trace
from memtui.tui.app import MemtuiApp
from memtui.units import format_bytes
from tests.conftest import REPO
from tests.helpers.screen_figures import (
    Shown,
    alive_at,
    bytes_by_frame,
    events_of,
    innermost_user_frame,
    peak_event,
    seconds,
)

DEMO = REPO / "snapshots" / "demo_training.pickle"


@pytest.fixture(scope="module")
def demo():
    return load_trace(DEMO)


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_findings_screen_first_on_the_demo(snap_compare, demo, size):
    """The demo's planted leak is of high severity: the Findings screen comes first.  Its
    figures, from the blocks: log_metrics keeps one 256 KiB block in each of the 187
    ProfilerStep#N steps, never freed."""
    shown = Shown()
    assert snap_compare(MemtuiApp(demo, findings_first=True), terminal_size=size,
                        run_before=shown)
    kept = innermost_user_frame(demo, demo.blocks.filter(pl.col("t_free").is_null())).filter(
        pl.col("frame") == "log_metrics (train.py:195)")
    steps = demo.markers.filter(pl.col("name").str.starts_with("ProfilerStep")).height
    assert kept.height == steps
    per_step = kept["size"].sum() // steps
    text = _flat(shown.text)
    assert (f"HIGH leak on cuda:0 log_metrics (train.py:195) leaks {format_bytes(per_step)} "
            f"per step since ProfilerStep#0 ({format_bytes(kept['size'].sum())} in {steps} "
            "steps)") in text
    figures = {tuple(line.split()) for line in shown.lines}  # one figure a line (item 9)
    if size[1] >= 40:  # at 80x24 these lines are further down the scrolling details pane
        assert ("blocks", str(kept.height)) in figures and ("steps", str(steps)) in figures
    found = int(re.search(r"(\d+) found", shown.lines[0]).group(1))
    listed = [line for line in shown.lines[1:found + 2]
              if re.match(r"^ (HIGH|MED|MEDIUM|LOW|info) ", line)]
    assert len(listed) == found and listed[0].startswith(" HIGH leak")


def test_findings_screen_on_the_peak(snap_compare, demo):
    """The peak's detail: bytes by stack, share and blocks (the peak is listed after the
    leak, the savings and the fragmentation: as many downs as findings before it)."""
    before = [f.kind for f in ranked(flat(find_all(demo)))].index("peak")
    shown = Shown("6", *["down"] * before)
    assert snap_compare(MemtuiApp(demo), terminal_size=(120, 40), run_before=shown)
    peak = peak_event(demo, "cuda:0")
    events = events_of(demo, "cuda:0")
    alive = alive_at(demo, "cuda:0", peak)
    total = int(alive["size"].sum())
    facts = {"peak allocated": format_bytes(total),  # one fact a line (issue 35 item 9)
             "peak at": seconds(events["t"][peak], events["t"][0]),
             "blocks alive": str(alive.height),
             "peak reserved": format_bytes(events["reserved"].max())}
    for label, value in facts.items():
        assert any(re.fullmatch(rf"\s+{re.escape(label)}\s{{2,}}{re.escape(value)}", line.rstrip())
                   for line in shown.lines), (label, value)
    by_stack = [line.rstrip() for line in shown.lines].index(" by stack:")
    for offset, (frame, size, blocks) in enumerate(bytes_by_frame(demo, alive)[:5], 1):
        assert re.match(rf"^\s+{re.escape(format_bytes(size))}\s+{round(100 * size / total)}%"
                        rf"\s+{blocks} blocks\s+{re.escape(frame)}$",
                        shown.lines[by_stack + offset].rstrip()), shown.lines[by_stack + offset]
    assert re.search(rf"{re.escape(format_bytes(total))}\s+100%\s+{alive.height} blocks\s+CUDA",
                     shown.text)
