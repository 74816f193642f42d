"""A long msMemScope DB read hands over a preview: the model of the rows read so far, once.

The thresholds are made small here (a DB of 6,000 rows read in chunks of 1,000, previewed
from 2,000 rows on), so that each rule is seen on a file the tests write in a second.  The
preview must be the model a DB holding only those rows gives, and the whole capture the
same as a read without a preview.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import memtui.sources.memscope as memscope
from benchmarks.generate_memscope import generate_db
from memtui.errors import CaptureError
from memtui.loading import load_trace
from memtui.model import MemoryTrace
from memtui.sources import open_capture
from memtui.sources.memscope import read as memscope_read

FRAMES = ("events", "blocks", "segments", "frames", "stacks", "markers", "curves")
ROWS, CHUNK, PREVIEW_ROWS = 6_000, 1_000, 2_000


def settled(path: Path) -> Path:
    """``path`` (a DB the generator wrote in WAL mode) as a finished capture is: in
    rollback-journal mode, so that no read leaves a ``-wal`` beside it (a companion
    file: its coming and going would change the file's cache key)."""
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=DELETE")
    con.close()
    return path


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    return settled(generate_db(tmp_path_factory.mktemp("preview") / "memscope_dump_1.db",
                               ROWS, seed=3, trace_rows=0))


def small_chunks(monkeypatch) -> None:
    chunks = memscope_read.rowid_chunks
    monkeypatch.setattr(memscope_read, "rowid_chunks",
                        lambda con, table: chunks(con, table, CHUNK))


@pytest.fixture
def small_previews(monkeypatch):
    small_chunks(monkeypatch)
    monkeypatch.setattr(memscope, "PREVIEW_MIN_ROWS", ROWS - 1)
    monkeypatch.setattr(memscope, "PREVIEW_ROWS", PREVIEW_ROWS)


def _first_rows(db: Path, folder: Path, rows: int) -> Path:
    """A DB of the first ``rows`` rows of ``db``'s dump table (its own schema).  ``db``
    is opened read-only and closed here: a connection left to the collector could touch
    it later (a WAL checkpoint), and a file that changes while it is read is not cached."""
    path = folder / "memscope_dump_first.db"
    con = sqlite3.connect(f"file:{path}", uri=True)
    source = f"file:{db}?mode=ro"
    con.execute("ATTACH DATABASE ? AS src", (source,))
    schema = con.execute("SELECT sql FROM src.sqlite_master "
                         "WHERE name = 'memscope_dump'").fetchone()[0]
    con.execute(schema)
    con.execute("INSERT INTO main.memscope_dump SELECT * FROM src.memscope_dump "
                "ORDER BY rowid LIMIT ?", (rows,))
    con.commit()
    con.execute("DETACH DATABASE src")
    con.close()
    return path


def _same_frames(a: MemoryTrace, b: MemoryTrace) -> None:
    for name in FRAMES:
        assert getattr(a, name).equals(getattr(b, name)), name
    assert a.meta.device_names == b.meta.device_names


def test_one_preview_is_the_model_of_the_rows_read_so_far(db, tmp_path, small_previews):
    seen: list[MemoryTrace] = []
    whole = open_capture(db, preview=seen.append)
    assert len(seen) == 1
    preview = seen[0]
    assert preview.meta.extra["preview"] == {"rows": PREVIEW_ROWS, "of": ROWS}
    assert preview.events.height < whole.events.height
    _same_frames(preview, open_capture(_first_rows(db, tmp_path, PREVIEW_ROWS)))
    _same_frames(whole, open_capture(db))
    assert "preview" not in whole.meta.extra


def test_no_preview_of_a_short_read(db, monkeypatch):
    small_chunks(monkeypatch)
    seen: list[MemoryTrace] = []
    open_capture(db, preview=seen.append)  # 6,000 rows: under the real threshold
    assert seen == []
    monkeypatch.setattr(memscope, "PREVIEW_MIN_ROWS", 1)
    monkeypatch.setattr(memscope, "PREVIEW_ROWS", ROWS + 1)  # never reached
    open_capture(db, preview=seen.append)
    assert seen == []


def test_no_preview_from_the_cache_and_the_preview_prepared(db, small_previews):
    seen: list[MemoryTrace] = []
    load_trace(db, preview=seen.append)
    assert len(seen) == 1
    assert "flags" in seen[0].blocks.columns  # the load-time analyses applied
    assert seen[0].blocks["flags"].null_count() < seen[0].blocks.height
    load_trace(db, preview=seen.append)  # from the cache: nothing to wait for
    assert len(seen) == 1


@pytest.mark.parametrize("error", [CaptureError("x", "no rows"), KeyError("a bug")])
def test_a_preview_that_cannot_be_built_is_not_shown(db, small_previews, monkeypatch, error):
    def broken(files, path, progress=None):
        raise error

    real = memscope.build_trace
    calls = []

    def build(files, path, progress=None):
        calls.append(path)
        return (broken if len(calls) == 1 else real)(files, path, progress)

    monkeypatch.setattr(memscope, "build_trace", build)
    seen: list[MemoryTrace] = []
    whole = open_capture(db, preview=seen.append)
    assert seen == [] and len(calls) == 2
    assert whole.events.height > 0


def test_a_preview_of_one_chunk_leaves_its_rows_to_the_whole_build(db, monkeypatch):
    """The builder empties the frames it is given: a preview of the first chunk alone
    (one frame) must be built from frames of its own."""
    monkeypatch.setattr(memscope, "PREVIEW_MIN_ROWS", 1)
    monkeypatch.setattr(memscope, "PREVIEW_ROWS", 1)
    seen: list[MemoryTrace] = []
    whole = open_capture(db, preview=seen.append)  # one chunk of 6,000 rows
    assert len(seen) == 1 and seen[0].meta.extra["preview"] == {"rows": ROWS, "of": ROWS}
    _same_frames(whole, open_capture(db))
    _same_frames(seen[0], whole)


def test_a_preview_the_viewer_cannot_take_leaves_the_read_alone(db, small_previews):
    def refuse(trace):
        raise RuntimeError("the app is gone")

    _same_frames(open_capture(db, preview=refuse), open_capture(db))
