"""The one way every source opens an SQLite capture: read-only, never writing beside it.

msMemScope DBs, Ascend profiler DBs and files MindStudio Insight has opened all go
through :func:`connect_readonly`; the sniff helpers use :func:`table_names`, which never
raises, whatever the file holds.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memtui.sources.common.files import read_head

SQLITE_MAGIC = b"SQLite format 3\x00"


def is_sqlite(path: Path) -> bool:
    """Whether ``path`` starts with SQLite's magic (never raises)."""
    return read_head(path, 16) == SQLITE_MAGIC


def connect_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection that never writes the file and never holds up a writer.

    ``mode=ro`` keeps the file unchanged and reads through a live WAL.  A WAL-mode file
    with no ``-wal`` beside it has no writer (a WAL writer keeps one while connected): it
    is opened ``immutable``, so that SQLite creates no ``-wal``/``-shm`` beside the capture.
    ``timeout`` rides out a rollback-journal writer's locks; text that is not UTF-8 is
    decoded with replacement characters instead of failing the read.
    """
    path = Path(path).resolve()
    params = "mode=ro"
    if _wal_mode(path) and not Path(f"{path}-wal").exists():
        params += "&immutable=1"
    con = sqlite3.connect(f"{path.as_uri()}?{params}", uri=True, timeout=5.0,
                          isolation_level=None, check_same_thread=False)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    con.execute("PRAGMA query_only = 1")
    return con


def table_names(path: Path, views: bool = False) -> set[str] | None:
    """The tables (and views, if asked) of an SQLite file; None if it is not a readable one.

    Never raises: a corrupt file can make SQLite fail with text that is not UTF-8.
    """
    if not is_sqlite(path):
        return None
    kinds = "('table', 'view')" if views else "('table')"
    try:
        con = connect_readonly(path)
        try:
            rows = con.execute(f"SELECT name FROM sqlite_master WHERE type IN {kinds}").fetchall()
        finally:
            con.close()
    except (sqlite3.Error, UnicodeDecodeError, ValueError, OSError):
        return None
    return {row[0] for row in rows}


def sqlite_problem(exc: sqlite3.Error) -> str:
    """One plain sentence for an SQLite failure."""
    text = str(exc)
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return f"the SQLite database is corrupt or truncated ({text})"
    if "locked" in text or "busy" in text:
        return f"the SQLite database is locked by a writer ({text}); try again"
    return f"cannot read the SQLite database ({text})"


def _wal_mode(path: Path) -> bool:
    """The header's read/write format versions are 2 in WAL mode."""
    header = read_head(path, 20)
    return len(header) == 20 and header[18] == 2 and header[19] == 2
