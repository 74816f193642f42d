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


@pytest.mark.slow
def test_the_page_is_served_on_localhost():
    pytest.importorskip("textual_serve", reason="the serve extra (textual-serve) is absent")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "memtui.cli", "serve", str(DEMO),
                             "--port", str(port)], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
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
        if shutil.which("chromium") is None:
            pytest.skip("Debian's chromium is not installed: the page was served, the "
                        "Trend's drawing in a real browser is not checked")
        shot = subprocess.run(["chromium", "--headless", "--no-sandbox", "--dump-dom",
                               "--virtual-time-budget=15000", f"http://127.0.0.1:{port}/"],
                              capture_output=True, text=True, timeout=60)
        assert "textual" in shot.stdout.lower()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
