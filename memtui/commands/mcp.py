"""``memtui mcp [CAPTURE ...] [--root DIR ...]``: serve the captures to a coding agent over
the Model Context Protocol (stdio), read-only (memtui.mcp_server); the ``mcp`` extra.

The agent may read only the captures named here and what lies under a ``--root`` folder;
with neither, only the demo.  A client starts it as a subprocess, for example::

    {"mcpServers": {"memtui": {"command": "memtui",
                               "args": ["mcp", "--root", "/data/captures"]}}}
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from memtui.commands.paths import add_cache_argument
from memtui.errors import CaptureError

HELP = "serve captures to a coding agent over the Model Context Protocol (stdio, read-only)"
#: What installs the SDK.
INSTALL = "pip install 'memtui[mcp]'"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="capture",
                        help="a capture the agent may open (default: the demo, unless "
                             "--root is given)")
    parser.add_argument("--root", action="append", default=[], metavar="DIR",
                        help="a folder under which the agent may open any capture; repeat "
                             "for several")
    add_cache_argument(parser)


def run(args: argparse.Namespace) -> int:
    from memtui.commands.paths import demo_path

    for root in args.root:
        if not Path(root).is_dir():
            raise CaptureError(root, "--root: not a folder")
    for path in args.paths:
        if not Path(path).exists():
            raise CaptureError(path, "no such file or folder")
    if importlib.util.find_spec("mcp") is None:
        raise CaptureError("memtui mcp", f"needs the Model Context Protocol SDK: {INSTALL}")
    from memtui.mcp_server import Allowed, serve_stdio

    paths = args.paths or ([] if args.root else [str(demo_path())])
    serve_stdio(Allowed(paths, args.root), use_cache=False if args.no_cache else None)
    return 0
