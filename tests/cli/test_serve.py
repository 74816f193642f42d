"""``memtui serve``: the UI through textual-serve, on 127.0.0.1 by default."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from memtui.cli import main
from memtui.commands import serve

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "snapshots" / "demo_training.pickle"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_missing_capture_is_one_line_and_status_2(capsys, tmp_path):
    assert main(["serve", str(tmp_path / "absent.pickle")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "absent.pickle: no such file or folder" in err[0]


def test_the_served_command_is_this_python_running_memtui_on_the_path(tmp_path):
    path = tmp_path / "a capture.pickle"
    command = serve.ui_command(path)
    assert command.startswith(sys.executable.replace(" ", "\\ ")) or sys.executable in command
    assert command.endswith(f"-m memtui.cli '{path}'")


def test_defaults_bind_to_this_machine_only():
    import argparse

    parser = argparse.ArgumentParser()
    serve.add_arguments(parser)
    args = parser.parse_args(["x.pickle"])
    assert (args.host, args.port) == ("127.0.0.1", serve.DEFAULT_PORT)


async def _terminal_text(port: int, token: str, seconds: float = 30.0) -> str:
    """What the served app writes to a browser tab of 80x24 (textual-serve's websocket),
    until the Trend's legend (``peak``) shows or ``seconds`` pass."""
    import asyncio

    import aiohttp

    text = ""
    end = time.monotonic() + seconds
    async with aiohttp.ClientSession() as session, session.ws_connect(
            f"http://127.0.0.1:{port}/ws/{token}?width=80&height=24") as socket_:
        while time.monotonic() < end and "peak" not in text:
            try:
                message = await asyncio.wait_for(socket_.receive(), timeout=2)
            except TimeoutError:
                continue
            data = message.data
            text += data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)
    return text


async def _the_trend_draws_in_chromium(port: int, token: str, shots: Path) -> None:
    """A real headless Chromium opens the page: textual-serve's terminal gets the app's
    frames and xterm.js draws them on its canvas; ``1`` typed into the page shows the
    Trend (its "Live at" pane) and the canvas holds a drawn, coloured frame."""
    from tests.helpers.browser import Browser, chromium

    if chromium() is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium): the "
                    "page and the app's websocket frames were checked, not a real browser")
    async with Browser() as page:
        await page.goto(f"http://127.0.0.1:{port}/?token={token}")
        first = await page.wait_for(lambda s: "-first-byte" in s.body and s.lit > 2000)
        assert "-first-byte" in first.body, "no byte of the app reached the browser"
        assert first.lit > 2000, f"the terminal canvas stayed blank ({first.lit} pixels)"
        # the demo's first paint is the Trend, then its high finding shows the Findings
        settled = await page.wait_for(lambda s: "Findings" in s.text, seconds=20)
        received = len(settled.text)
        await page.press("1")
        shown = await page.wait_for(lambda s: "Live at" in s.text[received:] and s.lit > 5000)
        await page.screenshot(shots / "trend.png")
        assert "Live at" in shown.text[received:], "the Trend's frame never reached the page"
        assert shown.lit > 5000 and shown.colours >= 8, (
            f"the canvas shows no drawn Trend ({shown.lit} pixels, {shown.colours} colours; "
            f"see {shots / 'trend.png'})")


@pytest.mark.slow
async def test_the_page_is_served_on_localhost_and_the_trend_draws(tmp_path):
    pytest.importorskip("textual_serve", reason="the serve extra (textual-serve) is absent")
    port = free_port()
    proc, address = start_serve(port)
    token = address.split("token=")[1]
    try:
        page = fetch(address)
        assert "memtui demo_training.pickle" in page  # the title textual-serve puts in
        # a tab's terminal: the app runs and draws the Trend (its legend names the peak)
        text = await _terminal_text(port, token)
        assert "memtui" in text and "peak" in text
        await _the_trend_draws_in_chromium(port, token, tmp_path)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def start_serve(port: int, *extra: str) -> tuple[subprocess.Popen, str]:
    """``memtui serve DEMO --port PORT`` and the address (with its token) it printed."""
    proc = subprocess.Popen([sys.executable, "-m", "memtui.cli", "serve", str(DEMO),
                             "--port", str(port), *extra], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    assert "/?token=" in line, line
    address = line.split(" at ")[1].split(" (")[0]
    for _ in range(100):  # until it answers
        try:
            fetch(address.replace(f"localhost:{port}", f"127.0.0.1:{port}"))
            break
        except OSError:
            time.sleep(0.2)
    return proc, address


def fetch(address: str, headers: dict | None = None) -> str:
    request = urllib.request.Request(address, headers=headers or {})
    with urllib.request.urlopen(request, timeout=5) as reply:
        return reply.read().decode()
