"""``memtui findings [PATH] [--json]``: leaks, the peak, OOMs and more, found for you."""

from __future__ import annotations

import argparse
import json

from memtui.commands.paths import add_cache_argument
from memtui.errors import printable


def printable_lines(text: str) -> str:
    """``text`` with no control character of a file's names reaching the terminal."""
    return "\n".join(printable(line) for line in text.split("\n"))

HELP = "find leaks, the peak, OOM causes, fragmentation and capture limits"
#: Only prints: the process may end without tearing the interpreter down (cli.entry).
QUICK_EXIT = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", help="capture file or folder (default: the demo)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--stacks", action="store_true",
                        help="print the full call stack of each finding and of each of the "
                             "peak's stack groups")
    add_cache_argument(parser)


def run(args: argparse.Namespace) -> int:
    from memtui.analysis.findings import find_all, findings_json, format_findings
    from memtui.analysis.layers import has_layers, layer_view
    from memtui.commands.paths import capture_path
    from memtui.loading import load_trace

    trace = load_trace(capture_path(args.path), store_in_background=True)
    if has_layers(trace) and "layers" not in trace.meta.extra:
        # each device's default memory layer, as summary and the UI find them (all layers
        # mixed gave a free gap larger than the pool)
        trace = layer_view(trace)
    findings = find_all(trace)
    if args.json:
        print(json.dumps(findings_json(trace, findings, stacks=args.stacks)))
    else:
        print(printable_lines(format_findings(trace, findings, stacks=args.stacks)))
    return 0
