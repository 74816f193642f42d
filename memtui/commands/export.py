"""``memtui export PATH --to perfetto -o FILE.json`` / ``--to parquet -o DIR``.

Perfetto (and ``chrome://tracing``) read the trace-event JSON: a counter track per device
(allocated, reserved) and an instant event per finding, on the capture's own clock so a
profiler trace of the same run lines up (:mod:`memtui.export.perfetto`).  Parquet gets the
model's frames, Arrow types kept, for analysis elsewhere (:mod:`memtui.export.parquet`).
"""

from __future__ import annotations

import argparse

from memtui.commands.paths import add_cache_argument
from memtui.commands.role_rules import add_roles_argument, chosen_rules
from memtui.errors import CaptureError, printable

HELP = "export a capture: Perfetto trace-event JSON, or Parquet frames"
QUICK_EXIT = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="capture file or folder")
    parser.add_argument("--to", required=True, choices=("perfetto", "parquet"),
                        help="perfetto: one trace-event JSON file; parquet: a folder of "
                             "Parquet files (events, blocks, ...)")
    parser.add_argument("-o", "--output", required=True, metavar="OUT",
                        help="the JSON file (perfetto) or the folder (parquet) to write")
    add_cache_argument(parser)
    add_roles_argument(parser)


def run(args: argparse.Namespace) -> int:
    import sys

    from memtui.api import open_capture
    from memtui.outputs import output_file, output_folder

    inputs = [args.path]
    if args.to == "perfetto":  # checked before any work
        out = output_file(args.output, inputs=inputs)
    else:
        from memtui.export.parquet import is_export

        out = output_folder(args.output, inputs=inputs, marker=is_export)
    capture = open_capture(args.path, store_in_background=True, roles=chosen_rules(args))
    try:
        if args.to == "perfetto":
            from memtui.export.perfetto import export_perfetto

            samples = export_perfetto(capture.view(), capture.findings().devices, out,
                                      inputs=inputs)
            what = f"{samples} counter samples"
        else:
            from memtui.export.parquet import export_parquet

            files = export_parquet(capture.trace, out, inputs=inputs)
            what = ", ".join(p.name for p in files)
    except OSError as exc:
        raise CaptureError(out, f"cannot write it ({exc.strerror or exc})") from None
    print(f"memtui: wrote {printable(str(out))} ({what})", file=sys.stderr)
    return 0
