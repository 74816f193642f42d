"""``memtui state PATH [--device D] [--event K | --time T] [--json]``: the allocator state
just after one event, as the Pool screen shows it at that event.

K is the event's position in the device's trace (0-based, the number the status bar and
the Event View show), or ``first``, ``peak``, ``last`` (the default).  T is a time: ``+1.5s``
or ``250ms`` from the device's start, or a raw trace time; the state is then the one after
the last event at or before it.
"""

from __future__ import annotations

import argparse
import json

from memtui.commands.role_rules import add_roles_argument, chosen_rules

HELP = "print the allocator state (segments, blocks, free gaps) just after one event"
#: Only prints: the process may end without tearing the interpreter down (cli.entry).
QUICK_EXIT = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", help="capture file or folder (default: the demo)")
    parser.add_argument("--device", metavar="D",
                        help="device or rank (default: the one with the most events)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--event", metavar="K", default=None,
                       help="event position (0-based), or first, peak, last (default: last)")
    which.add_argument("--time", metavar="T", default=None,
                       help="a time: +1.5s / 250ms from the start, or a raw trace time")
    parser.add_argument("--layer", metavar="L",
                        help="msMemScope memory layer: PTA, HAL, ATB, ... (default: the "
                             "framework pool, else HAL)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_roles_argument(parser)


def run(args: argparse.Namespace) -> int:
    from memtui.api import open as open_capture
    from memtui.commands.paths import capture_path
    from memtui.errors import CaptureError
    from memtui.loading import NO_DEVICE

    try:
        state = open_capture(capture_path(args.path), roles=chosen_rules(args)).state(
            args.event, device=args.device, time=args.time, layer=args.layer)
    except CaptureError as exc:
        if not exc.problem.startswith(NO_DEVICE) or args.device is not None:
            raise
        # A capture with no memory data at all (a profiler_info_N.json whose folder holds
        # none): the allocator state there is empty, and that is the answer, with why.
        from memtui.analysis.layout.state import empty_state

        print(json.dumps(empty_state()) if args.json else exc.problem)
        return 0
    print(json.dumps(state.to_dict()) if args.json else state.text())
    return 0
