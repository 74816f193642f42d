"""``memtui summary [PATH ...] [--json]``: per-device figures, for people or for scripts.

Several paths, or a folder holding several captures, give one entry per rank and device
as well (``ranks``, outliers flagged), each rank computed in its own process or on a Dask
cluster (``--cluster``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from memtui.commands.paths import add_cache_argument
from memtui.commands.role_rules import add_roles_argument, chosen_rules
from memtui.errors import safe_line

HELP = "print per-device memory figures of a capture (or of every rank of a folder)"
#: Only prints: the process may end without tearing the interpreter down (cli.entry).
QUICK_EXIT = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="path",
                        help="capture file or folder, or several (default: the demo)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_rank_arguments(parser)
    add_cache_argument(parser)
    add_roles_argument(parser)


def add_rank_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of several ranks (shared with the UI command)."""
    parser.add_argument("--ranks", action="store_true",
                        help="take the paths as ranks of one run, even a single one")
    parser.add_argument("--cluster", metavar="ADDRESS",
                        help="compute the ranks on a Dask scheduler (tcp://host:8786), or "
                             "'local' for a LocalCluster here (needs the cluster extra)")
    parser.add_argument("--workers", type=int, metavar="N",
                        help="processes for the ranks (default: the cores)")
    parser.add_argument("--connect-timeout", type=float, default=5.0, metavar="SECONDS",
                        help="give up on a --cluster scheduler that has not answered by then "
                             "(default: 5)")


def run(args: argparse.Namespace) -> int:
    from memtui.commands.paths import capture_path, several_captures

    if several_captures(args.paths, args.ranks):
        return _run_ranks(args)
    path = capture_path(args.paths[0] if args.paths else None)
    if _print_from_cache(path, args.json):
        return 0
    from memtui.api import open_capture

    capture = open_capture(path, store_in_background=True, roles=chosen_rules(args))
    result = capture.summary()
    print(json.dumps(result.to_dict()) if args.json else result.text(), flush=True)
    capture._keep_summary(result, SUMMARY_TEXT)
    return 0


#: The derived cache result holding the printed summary (and the path it names).
SUMMARY_TEXT = "summary-text"


def _print_from_cache(path: Path, as_json: bool) -> bool:
    """Print the figures a reopened capture's cache entry keeps, without loading the trace
    (nor importing polars): True where it did, False where the cache has none.

    The figures were computed by the same code from the same file (the entry's key holds
    the file's size, mtime, edge hash and memtui's code stamp); only the path is the one
    given this time."""
    from memtui import cache

    if not cache.enabled():
        return False
    from memtui.sources.common.files import check_input

    check_input(path)  # a path gone bad since still says so in one line
    key = cache.key_of(path)
    if key is None:
        return False
    if as_json:
        data = cache.load_derived(key, "summary")
        if not isinstance(data, dict):
            return False
        data["path"] = str(path)
        print(json.dumps(data), flush=True)
        return True
    stored = cache.load_derived(key, SUMMARY_TEXT)
    if not isinstance(stored, dict) or not isinstance(stored.get("text"), str):
        return False
    text, named = stored["text"], safe_line(str(stored.get("path")))
    if not text.startswith(named):
        return False
    print(safe_line(str(path)) + text[len(named):], flush=True)
    return True


def _run_ranks(args: argparse.Namespace) -> int:
    from memtui.commands.paths import common_folder
    from memtui.errors import CaptureError
    from memtui.rankload import RankTable, check_connect_timeout, stream_results
    from memtui.sources.ranks import complete_ranks
    from memtui.text.ranks import format_ranks

    check_connect_timeout(args.connect_timeout)  # bad options: one line, before any work
    if args.cluster:
        from memtui.rankload import check_cluster_address

        check_cluster_address(args.cluster)  # a bad address: one line, before any work
    path = common_folder(args.paths)
    found = complete_ranks(args.paths, path)
    table = RankTable(len(found.captures))
    table.warnings.extend(found.warnings)
    for result in stream_results(found.captures, cluster=args.cluster, workers=args.workers,
                                 connect_timeout=args.connect_timeout):
        table.add(result)
        if result.error is not None:
            print(f"memtui: warning: skipped {result.error}", file=sys.stderr)
    if not table.rows and table.errors:
        raise CaptureError(path, f"no rank could be read (first: {table.errors[0]})")
    data = table.as_json(path)
    print(json.dumps(data) if args.json else format_ranks(data, table.rows))
    return 0
