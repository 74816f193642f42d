"""``--follow`` on msMemScope extends the model (``memscope.live.LiveBuild``) instead of
building it from every row: after each burst, every frame and figure equals what a fresh
open of the file at that moment shows (hand-worked bursts with out-of-order frees, a
range open across bursts, a new call stack, a block from before the capture; then the
generator's capture cut into random bursts)."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import polars as pl
import pytest

from memtui.analysis.summary import summary
from memtui.loading import load_trace, prepare_trace
from memtui.sources.memscope.tail import CsvTail, DbTail
from tests.helpers.live_captures import HEADER, DbWriter, assert_same_model, csv_line
from tests.helpers.memscope_files import PY_STACK, mem, row

STACK2 = '"/home/u/model.py(5): layer\n/home/u/train.py(20): <module>\n"'


def _pta(id_, event, t, aid, size, **more):
    return mem(id_, event, "PTA", t, aid, 0x1000 * aid, size, total=64 * 1024, **more)


#: Bursts in msMemScope's write order: a block's rows come when it is freed, so burst 2
#: holds a block allocated (150) before burst 1's free (300); burst 3 a block allocated
#: (90) before anything, never freed, and the end of a range begun in burst 2; burst 4
#: frees a block allocated before the capture (a ghost: every level moves).
HAND_BURSTS = [
    [row(1, "SYSTEM", "START_TRACE", 0, dev="N/A"),
     row(2, "MSTX", "Range_start", 50, name='"step"'),
     _pta(3, "MALLOC", 100, 1, 1000, py=PY_STACK, owner="PTA"),
     row(4, "OP_LAUNCH", "ATEN_START", 120, name="torch._ops.aten.add.Tensor"),
     row(5, "OP_LAUNCH", "ATEN_END", 130, name="torch._ops.aten.add.Tensor"),
     _pta(6, "FREE", 300, 1, 1000)],
    [_pta(7, "MALLOC", 150, 2, 2000, py=STACK2, owner="PTA"),
     mem(8, "ACCESS", "READ", 200, 2, 0x2000, 2000, type="PTA"),
     _pta(9, "FREE", 400, 2, 2000),
     row(10, "OP_LAUNCH", "ATEN_START", 410, name="torch._ops.aten.mul.Tensor")],
    [row(11, "OP_LAUNCH", "ATEN_END", 420, name="torch._ops.aten.mul.Tensor"),
     row(12, "MSTX", "Range_end", 450, name='"step"'),
     _pta(13, "MALLOC", 90, 3, 500, py=PY_STACK, owner="PTA")],
    [_pta(14, "FREE", 460, 9, 256)],
]
#: (blocks, peak allocated, allocated at the end) after each burst, worked out by hand:
#: 1: 1000 @100, 0 @300; 2: +2000 @150 -> 3000 peak; 3: +500 from 90 on -> 3500 peak,
#: 500 at the end; 4: the ghost's 256 under everything -> 3756 peak, 500 at the end.
HAND_FIGURES = [(1, 1000, 0), (2, 3000, 0), (3, 3500, 500), (4, 3756, 500)]


def _grow(path: Path, bursts) -> list:
    """The DB written burst by burst; after each, the grown model and a fresh open."""
    writer = DbWriter(path)
    tail = DbTail(path)
    steps = []
    try:
        for burst in bursts:
            writer.burst([tuple(str(v) for v in r) for r in burst])
            assert tail.read_new() == len(burst)
            steps.append((prepare_trace(tail.trace()), load_trace(path, use_cache=False)))
    finally:
        writer.close()
    return steps, tail


def test_hand_bursts_grow_as_a_fresh_open(tmp_path):
    steps, tail = _grow(tmp_path / "memscope_dump_live.db", HAND_BURSTS)
    for (grown, fresh), (blocks, peak, end) in zip(steps, HAND_FIGURES, strict=True):
        assert_same_model(grown, fresh)
        device = summary(grown)["devices"][0]
        assert (device["blocks"], device["peak_allocated_bytes"]) == (blocks, peak)
        assert grown.events["allocated"][-1] == end
    # the ranges: the op begun in burst 2 ends in burst 3, the step spans bursts 1 to 3
    ranges = steps[-1][0].markers.filter(pl.col("t_end").is_not_null())
    spans = (ranges["t_end"] - ranges["t"]).to_list()
    assert sorted(zip(ranges["kind"], spans, strict=True)) == [
        ("mstx_range", 400), ("op", 10), ("op", 10)]
    # bursts 2 and 3 extended the model; the ghost of burst 4 made it build anew
    assert (tail.live.extended, tail.live.rebuilds) == (2, 2)
    assert "before the capture" in tail.live.last_rebuild


def test_hand_bursts_in_a_dump_csv(tmp_path):
    """The same bursts appended to an msMemScope dump CSV."""
    path = tmp_path / "memscope_dump_live.csv"
    path.write_text(HEADER)
    tail = CsvTail(path)
    for burst, (blocks, peak, _) in zip(HAND_BURSTS, HAND_FIGURES, strict=True):
        with open(path, "a") as fh:
            fh.write("".join(csv_line(tuple(str(v) for v in r)) for r in burst))
        assert tail.read_new() == len(burst)
        grown = prepare_trace(tail.trace())
        assert_same_model(grown, load_trace(path, use_cache=False))
        device = summary(grown)["devices"][0]
        assert (device["blocks"], device["peak_allocated_bytes"]) == (blocks, peak)
    assert tail.live.extended == 2


def _copy_rows(src: Path, dst: Path, low: int, high: int) -> None:
    con = sqlite3.connect(dst)
    try:
        con.execute(f"ATTACH '{src}' AS src")
        con.execute("INSERT INTO memscope_dump SELECT * FROM src.memscope_dump "
                    "WHERE rowid > ? AND rowid <= ?", (low, high))
        con.commit()
    finally:
        con.close()


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_generated_capture_in_random_bursts(tmp_path, seed):
    """The generator's capture (out-of-order frees, HAL segments, ranges, stacks) cut into
    bursts of random sizes: each step's model equals a fresh open's."""
    from benchmarks.generate_memscope import generate_db

    full = generate_db(tmp_path / "full.db", 12_000, seed=seed, trace_rows=0)
    live = tmp_path / "memscope_dump_live.db"
    con = sqlite3.connect(live)
    con.execute(f"ATTACH '{full}' AS src")
    total = con.execute("SELECT max(rowid) FROM src.memscope_dump").fetchone()[0]
    con.execute("CREATE TABLE memscope_dump AS SELECT * FROM src.memscope_dump WHERE 0")
    con.commit()
    con.close()
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, total), 7)) + [total]
    tail = DbTail(live)
    done = 0
    for cut in cuts:
        _copy_rows(full, live, done, cut)
        done = cut
        tail.read_new()
        assert_same_model(prepare_trace(tail.trace()), load_trace(live, use_cache=False))
    assert tail.live.extended >= 4, tail.live.last_rebuild
