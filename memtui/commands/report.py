"""``memtui report [PATH [B]] -o FILE.html``: one self-contained HTML page to share (no
PATH: the demo, as every command opens it).

The page (:mod:`memtui.export.report`) needs nothing but itself: no script, no font, no
file fetched, inline SVG charts; it opens offline and as a CI artifact.  With two paths,
B is compared against A (the first) as ``memtui compare A B`` compares them.
"""

from __future__ import annotations

import argparse
import sys

from memtui.commands.paths import add_cache_argument, capture_path
from memtui.commands.role_rules import add_roles_argument, chosen_rules
from memtui.errors import CaptureError, printable

HELP = "write one self-contained HTML page of a capture (or of B against A)"
QUICK_EXIT = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="path",
                        help="the capture, or A and B: B compared against A (default: the demo)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE.html",
                        help="the page to write")
    parser.add_argument("--align", choices=("step", "time", "position"), default=None,
                        help="with two captures: how B's time maps onto A's (as compare)")
    add_cache_argument(parser)
    add_roles_argument(parser)


def run(args: argparse.Namespace) -> int:
    from memtui.api import compare_captures, open_capture
    from memtui.export.report import compare_html, report_html, write_report
    from memtui.outputs import output_file

    if len(args.paths) > 2:
        raise CaptureError(args.paths[2], "report takes one capture, or two (A and B)")
    paths = args.paths or [capture_path(None)]  # no capture: the demo, as every command
    out = output_file(args.output, inputs=paths)  # before any work
    rules = chosen_rules(args)
    captures = [open_capture(p, store_in_background=True, roles=rules) for p in paths]
    last = captures[-1]
    summary, found = last.summary().to_dict(), last.findings().devices
    if len(captures) == 1:
        page = report_html(last.view(), summary, found)
    else:
        comparison = compare_captures(captures[0], last, align=args.align)
        page = compare_html(comparison, captures[0].trace, last.view(), summary,
                            found)
    try:
        write_report(page, out, inputs=paths)
    except OSError as exc:
        raise CaptureError(out, f"cannot write it ({exc.strerror or exc})") from None
    print(f"memtui: wrote {printable(str(out))} ({len(page) / 1e3:.0f} kB)", file=sys.stderr)
    return 0
