"""``--cluster`` addresses that are no Dask scheduler: one line, quickly (issue 27, point 10).

Every server here listens on the loopback address only, and stops by itself."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from memtui.cli import main
from tests.helpers.rank_folders import write_ranks

pytest.importorskip("distributed", reason="the cluster extra (dask distributed) is not installed")


@pytest.fixture
def ranks(tmp_path):
    return write_ranks(tmp_path / "run", 2)


def one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memtui: "), captured.err
    assert "Traceback" not in captured.err
    return lines[0]


@pytest.mark.parametrize("address", ["foo", "tcp://", "http://127.0.0.1:8786", "inproc://x",
                                     "tcp://127.0.0.1:notaport", "tcp://127.0.0.1:1/path"])
def test_an_address_that_is_not_a_scheduler_address_is_named(ranks, capsys, address):
    line = one_line_error(capsys, ["summary", str(ranks), "--cluster", address])
    assert "is not a Dask scheduler address" in line


def test_tls_is_refused_with_what_to_do(ranks, capsys):
    line = one_line_error(capsys, ["summary", str(ranks), "--cluster", "tls://127.0.0.1:1"])
    assert "tls:// needs certificates" in line


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def serving(handle, seconds: float = 20.0) -> Iterator[int]:
    """A loopback server that runs ``handle(connection)`` for each client, for a while."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    done = threading.Event()

    def loop() -> None:
        deadline = time.monotonic() + seconds
        while not done.is_set() and time.monotonic() < deadline:
            try:
                connection, _ = server.accept()
            except OSError:
                continue
            handle(connection)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        done.set()
        thread.join(5)
        server.close()


def answer_http(connection: socket.socket) -> None:
    """What a web server on the port says to anything: an HTTP response, then goodbye."""
    connection.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/html\r\n"
                       b"Content-Length: 11\r\n\r\n<h1>no</h1>")
    connection.close()


def timed_error(capsys, ranks, address: str) -> tuple[str, float]:
    started = time.monotonic()
    line = one_line_error(capsys, ["summary", str(ranks), "--cluster", address,
                                   "--connect-timeout", "1"])
    return line, time.monotonic() - started


def test_a_port_nobody_listens_on(ranks, capsys):
    line, took = timed_error(capsys, ranks, f"127.0.0.1:{free_port()}")
    assert "no Dask scheduler answered" in line and took < 10


def test_a_server_that_closes_the_connection(ranks, capsys):
    with serving(lambda connection: connection.close()) as port:
        line, took = timed_error(capsys, ranks, f"tcp://127.0.0.1:{port}")
    assert "no Dask scheduler answered" in line and took < 10


def test_a_server_that_never_answers(ranks, capsys):
    held = []
    with serving(held.append) as port:
        line, took = timed_error(capsys, ranks, f"tcp://127.0.0.1:{port}")
    for connection in held:
        connection.close()
    assert "no Dask scheduler answered" in line and took < 10


def test_a_port_that_answers_http(ranks, capsys):
    with serving(answer_http) as port:
        line, took = timed_error(capsys, ranks, f"tcp://127.0.0.1:{port}")
    assert "no Dask scheduler answered" in line and "EiB" not in line.split("(")[0]
    assert took < 10
