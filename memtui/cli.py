"""Command line: ``memtui [PATH]`` opens the UI, ``memtui summary [PATH] [--json]`` prints figures.

With no PATH both use the demo capture shipped in ``snapshots/``.  Every unreadable input
ends as one line on stderr, ``memtui: PATH: problem``, and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from memtui import __version__
from memtui.errors import CaptureError

EXIT_BAD_INPUT = 2


def demo_path() -> Path:
    """The demo capture: ``snapshots/demo_training.pickle``, installed as ``memtui.snapshots``."""
    try:
        from memtui import snapshots
    except ImportError:  # running from a checkout: the snapshots/ folder beside memtui/
        return Path(__file__).resolve().parents[1] / "snapshots" / "demo_training.pickle"
    return Path(snapshots.__path__[0]) / "demo_training.pickle"


def _summary_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memtui summary", description="Print per-device memory figures of a capture."
    )
    parser.add_argument("path", nargs="?", help="capture file or folder (default: the demo)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def _ui_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memtui",
        description="Terminal explorer for GPU and Ascend NPU memory captures. "
        "`memtui summary PATH [--json]` prints figures instead of opening the UI.",
    )
    parser.add_argument("path", nargs="?", help="capture file or folder (default: the demo)")
    parser.add_argument("--version", action="version", version=f"memtui {__version__}")
    return parser


def run_summary(argv: Sequence[str]) -> int:
    from memtui.analysis.summary import format_summary, summary
    from memtui.sources import open_capture

    args = _summary_parser().parse_args(argv)
    path = Path(args.path) if args.path else demo_path()
    trace = open_capture(path)
    data = summary(trace)
    if args.json:
        print(json.dumps(data))
    else:
        print(format_summary(data, trace))
    return 0


def run_ui(argv: Sequence[str]) -> int:
    args = _ui_parser().parse_args(argv)
    path = Path(args.path) if args.path else demo_path()
    try:
        from memtui.tui.app import run_app
    except ImportError:  # the UI is not built yet: fall back to the summary
        return run_summary([str(path)])
    return run_app(path)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "summary":
            return run_summary(argv[1:])
        return run_ui(argv)
    except CaptureError as exc:
        print(f"memtui: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
