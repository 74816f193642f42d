"""``memtui [PATH]``: open a capture in the terminal UI; ``memtui A B``: compare two."""

from __future__ import annotations

import argparse

HELP = "open a capture in the terminal UI (the default command)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", help="capture file or folder (default: the demo)")
    parser.add_argument("other", nargs="?", metavar="B",
                        help="a second capture: compare PATH (A) with it, one cursor over both")


def run(args: argparse.Namespace) -> int:
    from memtui.commands.paths import capture_path

    if getattr(args, "other", None):
        from memtui.tui.compare_app import run_compare

        return run_compare(capture_path(args.path), args.other)
    from memtui.tui.app import run_app

    return run_app(capture_path(args.path))
