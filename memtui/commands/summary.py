"""``memtui summary [PATH] [--json]``: per-device figures, for people or for scripts."""

from __future__ import annotations

import argparse
import json

HELP = "print per-device memory figures of a capture"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", help="capture file or folder (default: the demo)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from memtui.analysis.summary import format_summary, summary
    from memtui.commands.paths import capture_path
    from memtui.loading import load_trace

    trace = load_trace(capture_path(args.path))
    data = summary(trace)
    print(json.dumps(data) if args.json else format_summary(data, trace))
    return 0
