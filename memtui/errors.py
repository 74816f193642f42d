"""The one exception a user ever sees: a capture that cannot be read, said in one line.

Paths and problems come from outside (file names, text read from files): every control
character or other unprintable one is shown escaped (``\\n``, ``\\x1b``), so the line stays
one line and nothing reaches the terminal raw.

The escaping every text output shares lives here too (light: no import beyond the
standard library): :func:`printable` for one string, :func:`safe_line` for a line of
output (also never one a CI runner reads as a command: GitHub Actions takes any line
starting with ``::``, after blanks, as one, Azure Pipelines one starting with ``##``),
:func:`safe_text` for lines joined.
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


#: Line starts a CI runner reads as a command, and how their first character is written:
#: GitHub Actions' workflow commands (``::error ...``), Azure Pipelines' logging commands
#: (``##vso[...]``, ``##[group]``).
COMMAND_STARTS = {"::": ESCAPED_COLON, "##": "\\x23"}


def safe_line(text: str) -> str:
    """One line of output: :func:`printable` (a newline inside it escaped, so it stays one
    line), and never starting (after blanks) with what a CI runner reads as a command:
    ``::`` (GitHub Actions) or ``##`` (Azure Pipelines); that first character is written
    ``\\x3a`` / ``\\x23``, as :func:`printable` writes escapes."""
    line = printable(text)
    stripped = line.lstrip(" ")
    for start, escaped in COMMAND_STARTS.items():
        if stripped.startswith(start):
            return line[: len(line) - len(stripped)] + escaped + stripped[1:]
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
