"""``memtui serve`` exposes nothing to other sites and fails in one line (issue 27, 11-12).

Servers listen on 127.0.0.1 only and are stopped by each test."""

from __future__ import annotations

import asyncio
import errno
import socket
import urllib.error

import pytest

from memtui.cli import main
from tests.cli.test_serve import DEMO, fetch, free_port, start_serve

pytest.importorskip("textual_serve", reason="the serve extra (textual-serve) is absent")
aiohttp = pytest.importorskip("aiohttp")


@pytest.fixture(scope="module")
def served():
    port = free_port()
    proc, address = start_serve(port, "--max-clients", "1")
    token = address.split("token=")[1]
    yield port, token
    proc.terminate()
    proc.wait(timeout=10)


def status_of(address: str, headers: dict | None = None) -> int:
    try:
        fetch(address, headers)
    except urllib.error.HTTPError as exc:
        return exc.code
    return 200


def test_the_page_wants_the_token(served):
    port, token = served
    assert status_of(f"http://127.0.0.1:{port}/") == 403
    assert status_of(f"http://127.0.0.1:{port}/?token=wrong") == 403
    assert status_of(f"http://127.0.0.1:{port}/?token={token}") == 200


def test_the_page_loads_no_font_from_elsewhere_and_names_the_browsers_address(served):
    port, token = served
    page = fetch(f"http://127.0.0.1:{port}/?token={token}",
                 headers={"Host": f"[::1]:{port}"})
    assert "googleapis" not in page and "gstatic" not in page
    assert f'data-session-websocket-url="ws://[::1]:{port}/ws/{token}"' in page
    assert "0.0.0.0" not in page


async def ws_status(url: str, headers: dict | None = None) -> int:
    async with aiohttp.ClientSession() as session:
        try:
            async with session.ws_connect(url, headers=headers or {}) as socket_:
                await socket_.close()
                return 101
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status


async def test_the_websocket_wants_the_token_and_the_pages_origin(served):
    port, token = served
    base = f"http://127.0.0.1:{port}"
    assert await ws_status(f"{base}/ws?width=80&height=24") == 404
    assert await ws_status(f"{base}/ws/wrong?width=80&height=24") == 403
    assert await ws_status(f"{base}/ws/{token}?width=80&height=24",
                           {"Origin": "https://evil.example"}) == 403
    assert await ws_status(f"{base}/ws/{token}?width=80&height=24",
                           {"Origin": f"http://127.0.0.1:{port}"}) == 101


async def test_connections_are_capped(served):
    port, token = served
    url = f"http://127.0.0.1:{port}/ws/{token}?width=5000&height=5000"
    async with aiohttp.ClientSession() as session:
        for _ in range(50):  # the last test's tab may still be closing
            try:
                first = await session.ws_connect(url)
                break
            except aiohttp.WSServerHandshakeError:
                await asyncio.sleep(0.2)
        await asyncio.sleep(0.5)
        assert await ws_status(url) == 503  # --max-clients 1
        await first.close()


def test_screen_sizes_are_clamped():
    from memtui.serve_web import MAX_COLUMNS, MAX_ROWS, clamp_size

    assert clamp_size(5000, 5000) == (MAX_COLUMNS, MAX_ROWS)
    assert clamp_size("80", "24") == (80, 24)
    assert clamp_size(-3, 0) == (1, 1)
    assert clamp_size("x", None) == (80, 24)
    assert clamp_size(10**30, 1e300) == (MAX_COLUMNS, MAX_ROWS)


def test_the_served_app_is_told_it_is_served():
    from memtui.serve_web import SERVED_ENV, _served_environment

    env = _served_environment(lambda width, height: {"COLUMNS": str(width)})(90, 30)
    assert env == {"COLUMNS": "90", SERVED_ENV: "1"}


def one_line(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("memtui: "), err
    return err[0]


def test_a_port_in_use_is_one_line(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        line = one_line(capsys, ["serve", str(DEMO), "--port", str(port)])
    assert f"--port {port}: already in use" in line


def test_a_host_that_is_no_address_is_one_line(capsys):
    line = one_line(capsys, ["serve", str(DEMO), "--host", "999.1.1.1"])
    assert "--host 999.1.1.1: not an address this machine can listen on" in line


def test_a_port_this_user_may_not_open_is_one_line(capsys, monkeypatch):
    def refuse(self, address):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(socket.socket, "bind", refuse)
    line = one_line(capsys, ["serve", str(DEMO), "--port", "80"])
    assert "--port 80: this user may not listen on it" in line
