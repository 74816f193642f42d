"""``memtui [PATH]``: open a capture in the terminal UI."""

from __future__ import annotations

import argparse

HELP = "open a capture in the terminal UI (the default command)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", help="capture file or folder (default: the demo)")


def run(args: argparse.Namespace) -> int:
    from memtui.commands.paths import capture_path
    from memtui.tui.app import run_app

    return run_app(capture_path(args.path))
