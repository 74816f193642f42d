"""``memtui serve``: the UI through textual-serve, on 127.0.0.1 by default."""

from __future__ import annotations

import shutil
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


async def _terminal_text(port: int, seconds: float = 30.0) -> str:
    """What the served app writes to a browser tab of 80x24 (textual-serve's websocket),
    until the Trend's legend (``peak``) shows or ``seconds`` pass."""
    import asyncio

    import aiohttp

    text = ""
    end = time.monotonic() + seconds
    async with aiohttp.ClientSession() as session, session.ws_connect(
            f"http://127.0.0.1:{port}/ws?width=80&height=24") as socket_:
        while time.monotonic() < end and "peak" not in text:
            try:
                message = await asyncio.wait_for(socket_.receive(), timeout=2)
            except TimeoutError:
                continue
            data = message.data
            text += data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)
    return text


@pytest.mark.slow
async def test_the_page_is_served_on_localhost_and_the_trend_draws():
    pytest.importorskip("textual_serve", reason="the serve extra (textual-serve) is absent")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "memtui.cli", "serve", str(DEMO),
                             "--port", str(port)], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        page = ""
        for _ in range(100):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1) as reply:
                    page = reply.read().decode()
                    break
            except OSError:
                time.sleep(0.2)
        assert "memtui demo_training.pickle" in page  # the title textual-serve puts in
        # a tab's terminal: the app runs and draws the Trend (its legend names the peak)
        text = await _terminal_text(port)
        assert "memtui" in text and "peak" in text
        if shutil.which("chromium") is None:
            pytest.skip("Debian's chromium is not installed: the page and the app's frames "
                        "were checked, not a real browser")
        dom = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                              "--dump-dom", f"http://127.0.0.1:{port}/"],
                             capture_output=True, text=True, timeout=90)
        # a real browser loads the page and textual-serve's terminal script
        assert "textual.js" in dom.stdout and "textual-terminal" in dom.stdout
    finally:
        proc.terminate()
        proc.wait(timeout=10)
