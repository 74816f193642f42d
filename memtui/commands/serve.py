"""``memtui serve PATH [--port N] [--host H]``: the same UI in a web browser.

For people who cannot use a terminal: ``textual-serve`` (the ``serve`` extra) runs
``memtui PATH`` for each browser tab and shows it in the page, guarded by
:mod:`memtui.serve_web` (a secret token in the printed address, the websocket's Origin
checked, connections and screen sizes capped, no file written by the served app).  It
listens on 127.0.0.1 unless told otherwise (``--host 0.0.0.0`` shares it with the
network: anyone who can reach the port and has the address with its token can read the
capture).  A port in use, an address that is not this machine's, or a port it may not
open is one line, before anything starts.
"""

from __future__ import annotations

import argparse
import errno
import shlex
import socket
import sys
from pathlib import Path

from memtui.errors import CaptureError, printable

HELP = "serve the UI to a web browser (textual-serve), on 127.0.0.1 by default"
DEFAULT_PORT = 8000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="capture file or folder to show")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port to listen on (default {DEFAULT_PORT})")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--max-clients", type=int, default=4, metavar="N",
                        help="browser tabs served at once (default 4)")


def ui_command(path: Path) -> str:
    """The shell command textual-serve runs per browser tab: this Python's ``memtui PATH``."""
    return f"{shlex.quote(sys.executable)} -m memtui.cli {shlex.quote(str(path))}"


def run(args: argparse.Namespace) -> int:
    from memtui.sources.common.files import check_input

    try:
        path = Path(args.path).resolve()
    except (OSError, RuntimeError, ValueError):
        raise CaptureError(args.path, "cannot be resolved (a link loop?)") from None
    check_input(path)  # missing, unreadable, not a file or folder: one line
    if not 0 < args.port < 65536:
        raise CaptureError(path, f"--port {args.port} is not a port number")
    if args.max_clients < 1:
        raise CaptureError("--max-clients", "must be 1 or more")
    try:
        from memtui.serve_web import GuardedServer
    except ImportError:
        print("memtui: serve needs textual-serve: pip install 'memtui[serve]'", file=sys.stderr)
        return 2
    check_can_listen(args.host, args.port)
    server = GuardedServer(ui_command(path), host=args.host, port=args.port,
                           title=f"memtui {path.name}", max_clients=args.max_clients)
    print(f"memtui: serving {printable(path.name)} at {page_address(args.host, args.port)}"
          f"/?token={server.token} (Ctrl+C stops)", file=sys.stderr, flush=True)
    try:
        server.serve()
    except OSError as exc:
        raise CaptureError(f"{args.host}:{args.port}", f"cannot serve there ({exc.strerror or exc})"
                           ) from None
    return 0


def page_address(host: str, port: int) -> str:
    """The address to open: this machine's for a wildcard host, IPv6 in brackets."""
    if host in ("0.0.0.0", "", "::"):
        host = socket.gethostname() or "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def check_can_listen(host: str, port: int) -> None:
    """A one-line :class:`CaptureError` where ``host:port`` cannot be listened on."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise CaptureError(f"--host {host}", "not an address this machine can listen on "
                                             f"({getattr(exc, 'strerror', None) or exc})"
                           ) from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except PermissionError:
            raise CaptureError(f"--port {port}", "this user may not listen on it (ports "
                                                 "below 1024 need root): choose another "
                                                 "with --port") from None
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CaptureError(f"--port {port}", "already in use (another memtui "
                                                     "serve?): choose another with --port"
                                   ) from None
            if exc.errno == errno.EADDRNOTAVAIL:
                raise CaptureError(f"--host {host}", "not an address of this machine"
                                   ) from None
            raise CaptureError(f"{host}:{port}", f"cannot listen there ({exc.strerror})"
                               ) from None
