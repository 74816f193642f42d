"""``memtui [PATH]``: open a capture in the terminal UI."""

from __future__ import annotations

import argparse

HELP = "open a capture in the terminal UI (the default command)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", help="capture file or folder (default: the demo)")
    parser.add_argument("-f", "--follow", action="store_true",
                        help="keep reading PATH as it grows (an msMemScope DB or CSV being "
                             "written, a folder of snapshot dumps) and show it live")


def run(args: argparse.Namespace) -> int:
    from memtui.commands.paths import capture_path
    from memtui.tui.app import run_app

    if args.follow and not args.path:
        from memtui.errors import CaptureError

        raise CaptureError("--follow", "needs a PATH: the file or folder being written")
    return run_app(capture_path(args.path), follow=args.follow)
