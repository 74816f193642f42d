"""The one exception a user ever sees: a capture that cannot be read, said in one line."""

from __future__ import annotations

from pathlib import Path


class CaptureError(Exception):
    """A file or folder memtui cannot read.  ``str()`` is the one line printed on stderr."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = str(path)
        self.problem = " ".join(problem.split())  # always one line
        super().__init__(f"{self.path}: {self.problem}")
