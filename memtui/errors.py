"""The one exception a user ever sees: a capture that cannot be read, said in one line.

Paths and problems come from outside (file names, text read from files): every control
character or other unprintable one is shown escaped (``\\n``, ``\\x1b``), so the line stays
one line and nothing reaches the terminal raw.
"""

from __future__ import annotations

from pathlib import Path


def printable(text: str) -> str:
    """``text`` with every unprintable character escaped as Python writes it (``\\x1b``)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


class CaptureError(Exception):
    """A file or folder memtui cannot read.  ``str()`` is the one line printed on stderr."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = printable(str(path))
        self.problem = printable(" ".join(problem.split()))  # always one line
        super().__init__(f"{self.path}: {self.problem}")
