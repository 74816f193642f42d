"""``memtui compare A B [--json]``: what changed from capture A to capture B, and where."""

from __future__ import annotations

import argparse
import json

from memtui.commands.paths import add_cache_argument
from memtui.commands.role_rules import add_roles_argument, chosen_rules

HELP = "compare two captures: peaks, deltas, and the stacks, owners and ops behind them"


def _rows(text: str) -> int:
    """``--top``: a count of rows, 0 or more (``-1`` sliced every row but the last)."""
    try:
        rows = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if rows < 0:
        raise argparse.ArgumentTypeError(f"{text}: a count of rows, 0 or more")
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", help="the baseline capture (file or folder)")
    parser.add_argument("b", help="the capture compared against it")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--align", choices=("step", "time", "position"), default=None,
                        help="how B's time maps onto A's (default: step where both have "
                             "steps, else time, else event position)")
    parser.add_argument("--shift", type=int, default=0,
                        help="shift B against A: steps, ns (events without a clock), or "
                             "events, by alignment")
    parser.add_argument("--top", type=_rows, default=10,
                        help="rows of each attribution in the text output (default 10)")
    add_cache_argument(parser)
    add_roles_argument(parser)


def run(args: argparse.Namespace) -> int:
    from memtui.api import compare_captures

    result = compare_captures(args.a, args.b, align=args.align, shift=args.shift,
                      store_in_background=True, roles=chosen_rules(args))
    print(json.dumps(result.to_dict()) if args.json else result.text(args.top))
    return 0
