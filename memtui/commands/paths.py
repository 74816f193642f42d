"""Where the demo capture lives, for commands run without a PATH."""

from __future__ import annotations

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
    """The path a command was given, or the demo where it was given none."""
    return Path(arg) if arg else demo_path()
