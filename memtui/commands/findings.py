"""``memtui findings [PATH] [--json] [--stacks]``: leaks, the peak, OOMs and more, found for
you (``--stacks``: with the full call stack of each finding and of each peak group)."""

from __future__ import annotations

import argparse
import json

from memtui.commands.paths import add_cache_argument
from memtui.commands.role_rules import add_roles_argument, chosen_rules
from memtui.errors import printable

HELP = "find leaks, the peak, OOM causes, fragmentation and capture limits"
#: Only prints: the process may end without tearing the interpreter down (cli.entry).
QUICK_EXIT = True


def printable_lines(text: str) -> str:
    """``text`` with no control character of a file's names reaching the terminal."""
    return "\n".join(printable(line) for line in text.split("\n"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", help="capture file or folder (default: the demo)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--stacks", action="store_true",
                        help="print the full call stack of each finding and of each of the "
                             "peak's stack groups")
    add_cache_argument(parser)
    add_roles_argument(parser)


def run(args: argparse.Namespace) -> int:
    from memtui.api import open_capture
    from memtui.commands.paths import capture_path

    capture = open_capture(capture_path(args.path), store_in_background=True,
                    roles=chosen_rules(args))
    found = capture.findings(stacks=args.stacks)
    print(json.dumps(found.to_dict()) if args.json else printable_lines(found.text()))
    return 0
