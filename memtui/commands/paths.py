"""Which captures a command was given: the demo without a PATH, or several ranks."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

DEMO_NAME = "demo_training.pickle"


def demo_path() -> Path:
    """The demo capture ``snapshots/demo_training.pickle``.

    A wheel installs ``snapshots/`` as ``memtui/snapshots``; in a source checkout (or an
    editable install) it sits beside the package.
    """
    package = Path(__file__).resolve().parent.parent
    for folder in (package / "snapshots", package.parent / "snapshots"):
        if (folder / DEMO_NAME).is_file():
            return folder / DEMO_NAME
    return package / "snapshots" / DEMO_NAME  # missing: open_capture says so in one line


def capture_path(arg: str | None) -> Path:
    """The path a command was given, or the demo where it was given none.  An empty
    ``""`` (``memtui check "$CAPTURE"`` with the variable unset) is refused in one line:
    neither the demo nor the current folder (``Path("")`` is ``.``)."""
    if arg is None:
        return demo_path()
    if not arg:
        from memtui.errors import CaptureError

        raise CaptureError(repr(arg), "an empty path: name a capture file or folder")
    return Path(arg)


def several_captures(paths: list[str], force: bool = False, at_least: int = 2) -> bool:
    """Whether ``paths`` open as ranks: ``at_least`` paths or more, one folder holding
    several captures, or ``force`` (``--ranks``).  An empty path among them is refused
    (:func:`capture_path`): a walk of ``.`` is not what ``""`` meant."""
    for given in paths:
        capture_path(given)
    if force or len(paths) >= at_least:
        return bool(paths)
    from memtui.sources.common.files import is_folder

    if len(paths) != 1 or not is_folder(paths[0]):
        return False  # one file: no need to import every source to count captures
    from memtui.sources.ranks import count_captures

    return count_captures(paths) >= 2


def common_folder(paths: list[str]) -> str:
    """The one path given, or the folder the paths share (what ``summary`` names)."""
    if len(paths) == 1:
        return paths[0]
    try:
        return os.path.commonpath([str(Path(p).absolute()) for p in paths])
    except ValueError:
        return "."


def add_cache_argument(parser: argparse.ArgumentParser) -> None:
    """``--no-cache``: read the input itself, and leave the reopen cache alone
    (``memtui.cli`` turns the cache off for the process when it is given).  The help names
    the folder this process would use ($XDG_CACHE_HOME's)."""
    from memtui.cache import cache_dir  # the standard library only: --help stays fast

    parser.add_argument("--no-cache", action="store_true",
                        help=f"neither read nor write the reopen cache ({cache_dir()})")
