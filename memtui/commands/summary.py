"""``memtui summary [PATH ...] [--json]``: per-device figures, for people or for scripts.

Several paths, or a folder holding several captures, give one entry per rank and device
as well (``ranks``, outliers flagged), each rank computed in its own process or on a Dask
cluster (``--cluster``).
"""

from __future__ import annotations

import argparse
import json
import sys

from memtui.commands.paths import add_cache_argument

HELP = "print per-device memory figures of a capture (or of every rank of a folder)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="path",
                        help="capture file or folder, or several (default: the demo)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_rank_arguments(parser)
    add_cache_argument(parser)


def add_rank_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of several ranks (shared with the UI command)."""
    parser.add_argument("--ranks", action="store_true",
                        help="take the paths as ranks of one run, even a single one")
    parser.add_argument("--cluster", metavar="ADDRESS",
                        help="compute the ranks on a Dask scheduler (tcp://host:8786), or "
                             "'local' for a LocalCluster here (needs the cluster extra)")
    parser.add_argument("--workers", type=int, metavar="N",
                        help="processes for the ranks (default: the cores)")


def run(args: argparse.Namespace) -> int:
    from memtui.commands.paths import capture_path, several_captures

    if several_captures(args.paths, args.ranks):
        return _run_ranks(args)
    from memtui import cache
    from memtui.analysis.summary import format_summary, summary
    from memtui.loading import load_trace

    path = capture_path(args.paths[0] if args.paths else None)
    trace = load_trace(path, store_in_background=True)
    # a reopened capture's figures come from the cache too (findings take a while)
    key = cache.key_of(path) if cache.enabled() else None
    data = cache.load_derived(key, "summary") if key is not None else None
    computed = data is None
    if computed:
        data = summary(trace)
    else:
        data["path"] = trace.meta.path  # the path as given this time
    print(json.dumps(data) if args.json else format_summary(data, trace), flush=True)
    if computed and key is not None:
        cache.save_derived(key, "summary", data)
    return 0


def _run_ranks(args: argparse.Namespace) -> int:
    from memtui.analysis.ranks import format_ranks
    from memtui.commands.paths import common_folder
    from memtui.errors import CaptureError
    from memtui.rankload import RankTable, stream_results
    from memtui.sources.ranks import discover_ranks

    found = discover_ranks(args.paths)
    path = common_folder(args.paths)
    if not found.captures:
        raise CaptureError(path, "holds no capture memtui reads")
    table = RankTable(len(found.captures))
    table.warnings.extend(found.warnings)
    for result in stream_results(found.captures, cluster=args.cluster, workers=args.workers):
        table.add(result)
        if result.error is not None:
            print(f"memtui: warning: skipped {result.error}", file=sys.stderr)
    if not table.rows and table.errors:
        raise CaptureError(path, f"no rank could be read (first: {table.errors[0]})")
    data = table.as_json(path)
    print(json.dumps(data) if args.json else format_ranks(data, table.rows))
    return 0
