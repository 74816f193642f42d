"""``memtui findings [PATH] [--json]``: leaks, the peak, OOMs and more, found for you."""

from __future__ import annotations

import argparse
import json

from memtui.commands.paths import add_cache_argument

HELP = "find leaks, the peak, OOM causes, fragmentation and capture limits"
#: Only prints: the process may end without tearing the interpreter down (cli.entry).
QUICK_EXIT = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", help="capture file or folder (default: the demo)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_cache_argument(parser)


def run(args: argparse.Namespace) -> int:
    from memtui.api import _open
    from memtui.commands.paths import capture_path

    found = _open(capture_path(args.path), store_in_background=True).findings()
    print(json.dumps(found.to_dict()) if args.json else found.text())
    return 0
