"""``memtui export PATH --to perfetto -o FILE.json`` / ``--to parquet -o DIR``.

Perfetto (and ``chrome://tracing``) read the trace-event JSON: a counter track per device
(allocated, reserved) and an instant event per finding, on the capture's own clock so a
profiler trace of the same run lines up (:mod:`memtui.export.perfetto`).  Parquet gets the
model's frames, Arrow types kept, for analysis elsewhere (:mod:`memtui.export.parquet`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from memtui.commands.paths import add_cache_argument
from memtui.errors import CaptureError

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


def run(args: argparse.Namespace) -> int:
    import sys

    from memtui.api import _open

    capture = _open(args.path, store_in_background=True)
    out = Path(args.output)
    try:
        if args.to == "perfetto":
            from memtui.export.perfetto import export_perfetto

            samples = export_perfetto(capture.view(), capture.findings().devices, out)
            what = f"{samples} counter samples"
        else:
            from memtui.export.parquet import export_parquet

            files = export_parquet(capture.trace, out)
            what = ", ".join(p.name for p in files)
    except OSError as exc:
        raise CaptureError(out, f"cannot write it ({exc.strerror or exc})") from None
    print(f"memtui: wrote {out} ({what})", file=sys.stderr)
    return 0
