"""``memtui report`` (issue 24): the page's content, without a browser.

The hand snapshot's page (one OOM at 11 us, peak 4 KiB) and the loop pair's (B's forward
1 MiB larger than A's) are read as text: self-contained (no script, no fetched resource),
the curve's SVG with the peak marker at the peak's place, the OOM marked, every finding,
the stacks at the peak, for two captures the aligned curves and the difference; names
from files escaped.  ``test_report_browser.py`` opens such pages in Chromium.
"""

from __future__ import annotations

import re

import pytest

from memtui.cli import main
from tests.conftest import REPO
from tests.helpers.compare_traces import MiB, write_loop
from tests.helpers.hand_snapshot import write_hand_snapshot

DEMO = REPO / "snapshots" / "demo_training.pickle"
#: What a page may never hold: scripts, fetched files, fonts, external CSS.
FETCHES = re.compile(r"<script|\bsrc\s*=|<link|@import|url\(|@font-face|https?://(?!www\.w3"
                     r"\.org/2000/svg)", re.IGNORECASE)


def report(capsys, out, *paths) -> str:
    code = main(["report", *map(str, paths), "-o", str(out)])
    capsys.readouterr()
    assert code == 0
    return out.read_text()


def test_the_page_of_one_capture(tmp_path, capsys):
    page = report(capsys, tmp_path / "hand.html", write_hand_snapshot(tmp_path / "hand.pickle"))
    assert page.startswith("<!DOCTYPE html>")
    assert not FETCHES.search(page)
    svg = re.search(r'<svg id="curve-0".*?</svg>', page, re.S).group(0)
    assert 'id="peak-allocated-0"' in svg and "allocated peak 4.0 KiB" in svg
    assert 'id="peak-reserved-0"' in svg and "reserved peak 6.0 KiB" in svg
    assert svg.count('class="oom-marker"') == 1
    assert "out of memory asking 2.0 KiB" in svg  # the OOM line's tooltip
    for kind in ("oom", "fragmentation", "capture", "peak"):
        assert f"</span> <b>{kind}</b>" in page
    assert "At the peak" in page and "by stack (the innermost user frame)" in page
    # the attribution at the peak (4 KiB: 1.5 KiB of ghosts, b1, b2, b3), hand-computed
    assert re.search(r"<td[^>]*>1.0 KiB</td><td[^>]*>25.0%</td><td[^>]*>1</td>"
                     r"<td[^>]*>alloc_b1 \(model.py:10\)</td>", page)
    assert re.search(r"<td[^>]*>1.5 KiB</td><td[^>]*>37.5%</td><td[^>]*>2</td>"
                     r"<td[^>]*>alive before the capture</td>", page)
    assert "Capture facts" in page


def test_the_peak_marker_sits_at_the_peak(tmp_path, capsys):
    page = report(capsys, tmp_path / "demo.html", DEMO)
    circle = re.search(r'<g class="peak-marker" id="peak-allocated-0">.*?<circle [^>]*'
                       r'cx="([0-9.]+)" cy="([0-9.]+)"', page, re.S)
    x, y = float(circle.group(1)), float(circle.group(2))
    # the demo peaks at +0.314935 s of 0.628 s: half-way across the plot (78..944 px),
    # 5.4 GiB of a 6.9 GiB axis (6.4 GiB reserved + 8%): near the top (24..240 px)
    assert 500 < x < 530
    assert 24 < y < 80
    # the leak, with its evidence stack
    assert re.search(r"<li>log_metrics <span class='muted'>/work/train.py:195</span></li>",
                     page)


def test_the_page_of_two_captures(tmp_path, capsys):
    a = write_loop(tmp_path / "a.pickle", steps=6)
    b = write_loop(tmp_path / "b.pickle", steps=6, forward=5 * MiB)
    page = report(capsys, tmp_path / "pair.html", a, b)
    assert not FETCHES.search(page)
    svg = re.search(r'<svg id="compare-0".*?</svg>', page, re.S).group(0)
    assert 'id="peak-a-0"' in svg and 'id="peak-b-0"' in svg
    assert "A allocated peak 6.0 MiB" in svg and "B allocated (aligned) peak 7.0 MiB" in svg
    assert "aligned by step" in page
    assert re.search(r"<td[^>]*>peak allocated</td><td[^>]*>6.0 MiB</td><td[^>]*>7.0 MiB"
                     r"</td><td[^>]*>\+1.0 MiB</td>", page)
    assert "The difference by stack" in page and "forward (model.py:10)" in page


def test_names_from_files_are_escaped(tmp_path, capsys):
    hostile = write_hand_snapshot(tmp_path / "run<img src=x onerror=alert(1)>.pickle")
    page = report(capsys, tmp_path / "h.html", hostile)
    assert "<img" not in page and "run&lt;img src=x onerror=alert(1)&gt;" in page


@pytest.mark.parametrize("argv, problem", [
    (["a", "b", "c"], "report takes one capture, or two"),
])
def test_bad_arguments_are_one_line(tmp_path, capsys, argv, problem):
    code = main(["report", *argv, "-o", str(tmp_path / "x.html")])
    err = capsys.readouterr().err
    assert code == 2 and problem in err and err.count("\n") == 1


def test_without_a_capture_the_page_is_the_demos(tmp_path, capsys, monkeypatch):
    """Like every other command, ``report -o F`` without a capture opens the demo."""
    monkeypatch.chdir(tmp_path)
    page = report(capsys, tmp_path / "demo.html")
    assert "demo_training.pickle" in page
    assert "allocated peak 5.4 GiB" in page
