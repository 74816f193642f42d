"""``memtui [PATH ...]``: open a capture in the terminal UI, or several ranks of one run.

A folder holding several captures, three paths or more, or ``--ranks`` open the Ranks
screen (issue 14); two paths are the compare mode's (issue 10) unless ``--ranks`` says
they are ranks.
"""

from __future__ import annotations

import argparse

from memtui.commands.paths import add_cache_argument
from memtui.commands.role_rules import add_roles_argument, chosen_rules

HELP = "open a capture in the terminal UI (the default command)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from memtui.commands.summary import add_rank_arguments

    parser.add_argument("paths", nargs="*", metavar="path",
                        help="capture file or folder, or several ranks (default: the demo)")
    parser.add_argument("-f", "--follow", action="store_true",
                        help="keep reading PATH as it grows (an msMemScope DB or CSV being "
                             "written, a folder of snapshot dumps) and show it live")
    parser.add_argument("--rank", type=int, metavar="N",
                        help="with --follow, of a folder holding several ranks' dumps: the "
                             "rank to follow (default: the lowest; the status bar says which)")
    add_rank_arguments(parser)
    add_cache_argument(parser)
    add_roles_argument(parser)


def run(args: argparse.Namespace) -> int:
    from memtui.commands.paths import capture_path, several_captures

    paths = args.paths
    if args.follow:
        return _run_follow(paths, args.rank)
    if args.rank is not None:
        from memtui.errors import CaptureError

        raise CaptureError("--rank", "goes with --follow (several ranks open the Ranks screen)")
    if several_captures(paths, args.ranks, at_least=3):
        return _run_ranks(args)
    if len(paths) == 2:  # compare mode (issue 10): A and B on one cursor
        from memtui.tui.compare_app import run_compare

        return run_compare(paths[0], paths[1])
    from memtui.tui.app import run_app

    return run_app(capture_path(paths[0] if paths else None), role_rules=chosen_rules(args))


def _run_follow(paths: list[str], rank: int | None = None) -> int:
    from memtui.errors import CaptureError
    from memtui.tui.app import run_app

    if len(paths) != 1:
        raise CaptureError("--follow", "needs one PATH: the file or folder being written")
    from memtui.commands.paths import capture_path

    capture_path(paths[0])  # "" refused: following "." is not what it meant
    from memtui.sources.follow import open_follower

    open_follower(paths[0], rank).close()  # what cannot be followed: one line, before the UI
    return run_app(paths[0], follow=True, follow_rank=rank)


def _run_ranks(args: argparse.Namespace) -> int:
    from memtui.commands.paths import common_folder
    from memtui.errors import CaptureError
    from memtui.rankload import CLUSTER_HINT, dask_available
    from memtui.sources.ranks import complete_ranks
    from memtui.tui.ranks_app import run_ranks_app

    if args.cluster and not dask_available():
        raise CaptureError("--cluster", CLUSTER_HINT)
    from memtui.rankload import check_connect_timeout

    check_connect_timeout(args.connect_timeout)  # bad options: one line, before any work
    if args.cluster:
        from memtui.rankload import check_cluster_address

        check_cluster_address(args.cluster)
    found = complete_ranks(args.paths, common_folder(args.paths))
    return run_ranks_app(found, cluster=args.cluster, workers=args.workers,
                         connect_timeout=args.connect_timeout)
