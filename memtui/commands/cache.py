"""``memtui cache clear|info``: the reopen cache under ``$XDG_CACHE_HOME/memtui``.

The cache itself (what it holds, its keys, its cap) is :mod:`memtui.cache`.
"""

from __future__ import annotations

import argparse

HELP = "clear the reopen cache, or say where it is and what it holds"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("clear", "info"),
                        help="clear: delete every entry; info: where it is, entries, bytes")


def run(args: argparse.Namespace) -> int:
    from memtui import cache
    from memtui.errors import printable

    root = cache.cache_dir()
    shown = printable(str(root))
    if args.action == "clear":
        done = cache.clear()
        print(f"cleared {_entries(done.entries)} ({done.bytes / 1e6:.1f} MB) from {shown}")
        if done.failed:
            from memtui.errors import CaptureError

            raise CaptureError(root, f"could not remove {_entries(done.failed)} "
                                     "(no permission?): they are still there")
        return 0
    entries, size = cache.usage()
    cap = cache.max_bytes() / 1e9
    print(f"{shown}: {_entries(entries)}, {size / 1e6:.1f} MB (cap {cap:.1f} GB)")
    from memtui.analysis.replay.compiled import replay_in_use
    from memtui.sources.common.compiled import pairing_in_use
    from memtui.sources.common.sqlite import rows_in_use
    from memtui.sources.torch_snapshot.reader_choice import reader_in_use

    print(reader_in_use())
    print(pairing_in_use())
    print(rows_in_use())
    print(replay_in_use())
    return 0


def _entries(count: int) -> str:
    return f"{count} entry" if count == 1 else f"{count} entries"
