"""``memtui report`` in a real headless Chromium (issue 24), offline.

Chromium (Debian's ``chromium``; ``.ci/run`` installs it) opens the demo's page from a
file with a proxy that leads nowhere, logging every network request it makes (its
NetLog).  The page must ask for nothing (the browser's own background traffic to its
vendor's hosts aside; the control page shows the log does catch a page's fetches), its
DOM must hold the curve's SVG with the peak marker and the findings, and a screenshot
must show the curve (its blue) and the peak marker (its red).  The screenshot is kept
under the test's ``tmp_path``.  Skipped, saying so, where Chromium is not installed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from memtui.cli import main
from tests.conftest import REPO
from tests.helpers.png import count_colour, read_png

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium)")

DEMO = REPO / "snapshots" / "demo_training.pickle"
#: Where Chromium itself phones home (updates, time, accounts), whatever the page holds.
BROWSER_HOSTS = ("google.com", "googleapis.com", "gvt1.com", "gstatic.com",
                 "googleusercontent.com")
PEAK_RED = (192, 57, 43)  # .peak-marker's fill, #c0392b
CURVE_BLUE = (46, 134, 222)  # the allocated line, #2e86de


def chromium(tmp_path: Path, url: str, *args: str) -> tuple[str, list[str]]:
    """Chromium's stdout for ``url`` and the URLs its NetLog saw the page ask for."""
    netlog = tmp_path / f"netlog-{len(list(tmp_path.glob('netlog-*')))}.json"
    done = subprocess.run(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--disable-default-apps", "--disable-extensions",
         "--proxy-server=127.0.0.1:9", f"--user-data-dir={tmp_path / 'profile'}",
         f"--log-net-log={netlog}", *args, url],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    urls = set(re.findall(r'"url":"([^"]+)"', netlog.read_text(errors="replace")))
    fetched = [u for u in urls if not any(
        re.match(rf"https?://([^/]*\.)?{re.escape(host)}(/|:|$)", u) for host in BROWSER_HOSTS)]
    return done.stdout, sorted(fetched)


@pytest.fixture
def demo_page(tmp_path, capsys) -> Path:
    page = tmp_path / "demo.html"
    assert main(["report", str(DEMO), "-o", str(page)]) == 0
    capsys.readouterr()
    return page


def test_the_netlog_catches_what_a_page_fetches(tmp_path):
    control = tmp_path / "control.html"
    control.write_text('<html><body><img src="http://example.invalid/x.png">'
                       '<link rel="stylesheet" href="https://fonts.example.invalid/f.css">'
                       "</body></html>")
    _, fetched = chromium(tmp_path, control.as_uri(), "--dump-dom")
    assert "http://example.invalid/x.png" in fetched
    assert "https://fonts.example.invalid/f.css" in fetched


def test_the_demo_report_opens_offline_with_its_curve_and_findings(tmp_path, demo_page):
    dom, fetched = chromium(tmp_path, demo_page.as_uri(), "--dump-dom")
    assert fetched == []  # the page asked for nothing
    curve = re.search(r'<svg id="curve-0".*?</svg>', dom, re.S)
    assert curve, "the browser's DOM has no curve"
    assert re.search(r'<g class="peak-marker" id="peak-allocated-0">.*?<circle ', curve.group(0),
                     re.S)
    assert "allocated peak 5.4 GiB" in curve.group(0)
    assert "log_metrics (train.py:195) leaks 256.0 KiB per step" in dom
    assert "MLP.forward (model.py:150)" in dom  # the stack holding most at the peak


def test_a_screenshot_shows_the_curve_and_the_peak_marker(tmp_path, demo_page):
    shot = tmp_path / "report.png"
    _, fetched = chromium(tmp_path, demo_page.as_uri(), f"--screenshot={shot}",
                          "--window-size=1100,640", "--hide-scrollbars")
    assert fetched == []
    image = read_png(shot)
    assert image.shape[:2] == (640, 1100)
    assert count_colour(image, CURVE_BLUE) > 500  # the allocated line
    assert count_colour(image, PEAK_RED) > 40  # two peak markers (5 px radius each)
