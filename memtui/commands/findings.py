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
    from memtui.analysis.findings import findings_json, format_findings
    from memtui.analysis.layers import has_layers, layer_view
    from memtui.commands.paths import capture_path
    from memtui.loading import findings_of, load_trace

    trace = load_trace(capture_path(args.path), store_in_background=True)
    if has_layers(trace) and "layers" not in trace.meta.extra:
        # each device's default memory layer, as summary and the UI find them (all layers
        # mixed gave a free gap larger than the pool)
        trace = layer_view(trace)
    findings = findings_of(trace)  # kept beside the cache entry: a reopen finds none again
    if args.json:
        print(json.dumps(findings_json(trace, findings)))
    else:
        print(format_findings(trace, findings))
    return 0
