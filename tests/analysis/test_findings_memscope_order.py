"""Findings on msMemScope DBs in the writer's row order (issue 22, point 1).

msMemScope writes a block's MALLOC and FREE rows when the block is freed, and the blocks
never freed at the end: rows are not in time order.  A DB generated that way
(benchmarks/generate_memscope.py) with ``SYSTEM``/``STEP`` rows and one never-freed 3 MiB
block per step (owner ``PTA@leaks_mem``, innermost frame ``cache_for_debug``) must give the
leak, and the same rows rewritten in time order must give the same findings.
"""

from __future__ import annotations

import sqlite3

import numpy as np
import polars as pl
import pytest

from benchmarks.generate_memscope import LEAK_FUNCTION, LEAK_OWNER, generate_db
from memtui.analysis.findings import find_all
from memtui.analysis.findings.leak import find_leaks
from memtui.analysis.findings.peak import find_peak
from memtui.analysis.timeline.steps import find_steps
from memtui.sources import open_capture

MiB = 1 << 20
STEPS = 30


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The generated DB, rows in the writer's order."""
    path = tmp_path_factory.mktemp("leak") / "memscope_dump_20260101000000.db"
    return generate_db(path, 20_000, seed=3, steps=STEPS, leak_bytes=3 * MiB)


@pytest.fixture(scope="module")
def time_ordered(written, tmp_path_factory):
    """The same rows copied into a table ordered by ``Timestamp(ns), ID``."""
    path = tmp_path_factory.mktemp("sorted") / "memscope_dump_20260101000000.db"
    con = sqlite3.connect(path)
    con.execute(f"ATTACH DATABASE '{written}' AS w")
    con.execute('CREATE TABLE memscope_dump AS SELECT * FROM w.memscope_dump '
                'ORDER BY "Timestamp(ns)", ID')
    for (name,) in con.execute("SELECT name FROM w.sqlite_master WHERE name LIKE "
                               "'python_trace_%'").fetchall():
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM w.{name}")
    con.commit()
    con.close()
    return path


def test_rows_are_written_out_of_time_order(written):
    con = sqlite3.connect(written)
    t = np.array([r[0] for r in con.execute('SELECT "Timestamp(ns)" FROM memscope_dump')])
    con.close()
    assert (np.diff(t) < 0).sum() > 100


def test_planted_leak_found_with_owner_function_and_bytes(written):
    trace = open_capture(written)
    device = trace.meta.device_names[0]
    steps = find_steps(trace, device)
    assert steps.by_markers and steps.count == STEPS
    assert np.all(np.diff(steps.bounds) > 0)
    found = [f for f in find_leaks(trace, device) if f.detail["owner"] == LEAK_OWNER]
    assert len(found) == 1
    leak = found[0]
    assert leak.detail["function"] == LEAK_FUNCTION
    assert leak.detail["bytes_per_step"] == 3 * MiB
    # every step's block, the last step's too: it finished
    assert steps.last_finished
    assert leak.detail["blocks"] == STEPS
    assert leak.detail["total_bytes"] == STEPS * 3 * MiB
    assert leak.severity == "high"


def test_same_findings_as_the_rows_in_time_order(written, time_ordered):
    def digest(path):
        found = find_all(open_capture(path))
        return {device: sorted((f.kind, f.title, f.bytes) for f in items)
                for device, items in found.items()}

    assert digest(written) == digest(time_ordered)


def test_peak_names_every_block_alive_at_the_peak(written):
    """The blocks the peak finding sums are those alive just after the peak event, counted
    here by replaying the events in time order: by owner they make the whole peak."""
    trace = open_capture(written)
    device = trace.meta.device_names[0]
    peak = find_peak(trace, device)[0].detail
    events = trace.device_events(device)
    blocks = trace.device_blocks(device).filter(pl.col("pool") != "HAL")
    framework = events.filter(pl.col("block_id").is_in(blocks["block_id"].implode()))
    delta = framework.select(pl.when(pl.col("action") == "alloc").then(1)
                             .when(pl.col("action") == "free").then(-1).otherwise(0))
    alive = framework.with_columns(delta=delta.to_series() * pl.col("size"))
    level = alive["delta"].cum_sum().to_numpy() + int(
        blocks.filter(pl.col("ghost"))["size"].sum())
    assert level.max() == peak["peak_allocated_bytes"]
    at = int(np.argmax(level))
    counts = alive.head(at + 1).group_by("block_id").agg(
        net=pl.col("delta").sum()).filter(pl.col("net") > 0)
    ghosts = blocks.filter(pl.col("ghost") & (pl.col("seq_free").is_null() | (
        pl.col("seq_free") > framework["seq"][at])))
    assert peak["blocks_alive"] == counts.height + ghosts.height
    assert sum(row["bytes"] for row in peak["by_owner"]) == peak["peak_allocated_bytes"]
    assert sum(row["bytes"] for row in peak["by_stack"]) == peak["peak_allocated_bytes"]
