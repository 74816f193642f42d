"""``memtui serve PATH [--port N] [--host H]``: the same UI in a web browser.

For people who cannot use a terminal: ``textual-serve`` (the ``serve`` extra) runs
``memtui PATH`` for each browser tab and shows it in the page.  It listens on 127.0.0.1
unless told otherwise (``--host 0.0.0.0`` shares it with the network: the capture's
contents are then readable by anyone who can reach the port).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from memtui.errors import CaptureError

HELP = "serve the UI to a web browser (textual-serve), on 127.0.0.1 by default"
DEFAULT_PORT = 8000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="capture file or folder to show")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"port to listen on (default {DEFAULT_PORT})")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1: this machine only)")


def ui_command(path: Path) -> str:
    """The shell command textual-serve runs per browser tab: this Python's ``memtui PATH``."""
    return f"{shlex.quote(sys.executable)} -m memtui.cli {shlex.quote(str(path))}"


def run(args: argparse.Namespace) -> int:
    path = Path(args.path).resolve()
    if not path.exists():
        raise CaptureError(path, "no such file or folder")
    if not 0 < args.port < 65536:
        raise CaptureError(path, f"--port {args.port} is not a port number")
    try:
        from textual_serve.server import Server
    except ImportError:
        print("memtui: serve needs textual-serve: pip install 'memtui[serve]'", file=sys.stderr)
        return 2
    server = Server(ui_command(path), host=args.host, port=args.port,
                    title=f"memtui {path.name}")
    print(f"memtui: serving {path.name} at http://{args.host}:{args.port} (Ctrl+C stops)",
          file=sys.stderr)
    server.serve()
    return 0
