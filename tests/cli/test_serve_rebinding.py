"""Issue 31 item 5: ``memtui serve`` answers only requests addressed to itself.

A page on ``evil.example`` whose DNS is rebound to 127.0.0.1 sends ``Host`` and ``Origin``
of ``evil.example``: both match each other, so comparing them proves nothing.  Only an
address, ``localhost`` or the ``--host`` name given is this server's name.  A plain GET
on the websocket's path gets an HTTP answer; Ctrl+C ends the server without noise.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import urllib.error

import pytest

from tests.cli.test_serve import fetch, free_port, start_serve

pytest.importorskip("textual_serve", reason="the serve extra (textual-serve) is absent")
aiohttp = pytest.importorskip("aiohttp")


@pytest.fixture(scope="module")
def served():
    port = free_port()
    proc, address = start_serve(port)
    token = address.split("token=")[1]
    yield port, token, proc
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=10)


def status(url: str, headers: dict | None = None) -> int:
    try:
        fetch(url, headers)
    except urllib.error.HTTPError as exc:
        return exc.code
    return 200


async def ws_status(url: str, headers: dict) -> int:
    async with aiohttp.ClientSession() as session:
        try:
            async with session.ws_connect(url, headers=headers) as socket_:
                await socket_.close()
                return 101
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status


@pytest.mark.parametrize("host, allowed", [
    ("127.0.0.1:8000", True), ("[::1]:8000", True), ("localhost:8000", True),
    ("LOCALHOST", True), ("app.localhost:1", True), ("10.1.2.3:8000", True),
    ("evil.example:8000", False), ("127.0.0.1.nip.io:8000", False), ("", False),
    (None, False), ("evil.example", False),
])
def test_which_hosts_are_this_server(host, allowed):
    from memtui.serve_web import host_allowed

    assert host_allowed(host, "127.0.0.1") is allowed


def test_the_host_given_with_host_is_this_server():
    from memtui.serve_web import host_allowed

    assert host_allowed("gpu-box.lan:8000", "gpu-box.lan")
    assert not host_allowed("gpu-box.lan:8000", "127.0.0.1")
    # serving on every address, memtui prints this machine's name in the address to open
    import socket

    name = socket.gethostname()
    assert host_allowed(f"{name}:8000", "0.0.0.0")
    assert not host_allowed("evil.example:8000", "0.0.0.0")


async def test_a_rebound_name_is_refused_even_with_the_token(served):
    port, token, _ = served
    base = f"http://127.0.0.1:{port}"
    evil = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
    assert status(f"{base}/?token={token}", {"Host": f"evil.example:{port}"}) == 403
    assert await ws_status(f"{base}/ws/{token}?width=80&height=24", evil) == 403
    assert status(f"{base}/?token={token}", {"Host": f"localhost:{port}"}) == 200
    assert await ws_status(f"{base}/ws/{token}?width=80&height=24",
                           {"Origin": f"http://localhost:{port}",
                            "Host": f"localhost:{port}"}) == 101


def test_a_plain_get_on_the_websocket_path_is_answered(served):
    port, token, _ = served
    assert status(f"http://127.0.0.1:{port}/ws/{token}") == 426


async def test_ctrl_c_ends_it_quietly_with_a_tab_open(served):
    """SIGINT, as Ctrl+C sends it, while a tab's app runs: no traceback, no "Event loop
    is closed" from the app's process transports after the loop ended."""
    port, token, proc = served
    url = f"http://127.0.0.1:{port}/ws/{token}?width=80&height=24"
    async with aiohttp.ClientSession() as session:
        socket_ = await session.ws_connect(url)
        await socket_.receive(timeout=20)  # the app has started and drawn
        proc.send_signal(signal.SIGINT)
        try:
            _, err = await asyncio.to_thread(proc.communicate, timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        await socket_.close()
    assert proc.returncode is not None
    assert "Event loop is closed" not in err and "Traceback" not in err, err
