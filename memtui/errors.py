"""The one exception a user ever sees: a capture that cannot be read, said in one line.

Paths and problems come from outside (file names, text read from files): every control
character or other unprintable one is shown escaped (``\\n``, ``\\x1b``), so the line stays
one line and nothing reaches the terminal raw.

The escaping every text output shares lives here too (light: no import beyond the
standard library): :func:`printable` for one string, :func:`safe_line` for a line of
output (also never one a CI runner reads as a workflow command: GitHub Actions takes any
line starting with ``::``, after blanks, as one), :func:`safe_text` for lines joined.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def printable(text: str) -> str:
    """``text`` with every unprintable character escaped as Python writes it (``\\x1b``)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


#: How a line's first colon is written where the line would start with ``::``.
ESCAPED_COLON = "\\x3a"


def safe_line(text: str) -> str:
    """One line of output: :func:`printable` (a newline inside it escaped, so it stays one
    line), and never starting with ``::`` (after blanks), which a CI runner would read as a
    workflow command: that first colon is written ``\\x3a``, as :func:`printable` writes."""
    line = printable(text)
    stripped = line.lstrip(" ")
    if stripped.startswith("::"):
        return line[: len(line) - len(stripped)] + ESCAPED_COLON + stripped[1:]
    return line


def safe_text(lines: Iterable[str]) -> str:
    """``lines`` (each one line of output, as composed: a newline a string from a file
    carries inside one is escaped, never a line break) made safe and joined."""
    return "\n".join(safe_line(line) for line in lines)


class CaptureError(Exception):
    """A file or folder memtui cannot read.  ``str()`` is the one line printed on stderr."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = safe_line(str(path))
        self.problem = printable(" ".join(problem.split()))  # always one line
        super().__init__(f"{self.path}: {self.problem}")
