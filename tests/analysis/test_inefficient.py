"""Inefficient-block flags from access times (analysis/inefficient.py), by hand."""

from __future__ import annotations

import polars as pl

from memtui.analysis.findings.flags import Threshold, Thresholds, inefficient_flags
from memtui.model import FLAG_EARLY_ALLOCATION as EARLY
from memtui.model import FLAG_LATE_DEALLOCATION as LATE
from memtui.model import FLAG_TEMPORARY_IDLENESS as IDLE


def _blocks(*rows):
    return pl.DataFrame(rows, schema={"t_alloc": pl.Int64, "t_free": pl.Int64,
                                      "first_access": pl.Int64, "last_access": pl.Int64,
                                      "max_access_gap": pl.Int64}, orient="row")


BLOCKS = _blocks(
    (0, 100, 60, 70, 10),     # first touched at 60% of its life: early
    (0, 100, 10, 30, 20),     # freed 70 after its last access: late
    (0, 100, 5, 95, 80),      # idle 80 between two accesses: temporary idleness
    (0, 100, 50, 50, 0),      # exactly half: no flag (strictly more than half)
    (0, None, 10, 20, 10),    # never freed: its life runs to the trace end (200): late
    (0, 100, None, None, None),  # never accessed: no flag
    (0, 100, 0, 0, 0),        # touched only at its alloc: no flag (Insight needs last > alloc)
)


def test_default_thresholds_half_the_lifetime():
    assert inefficient_flags(BLOCKS, end_t=200).to_list() == [EARLY, LATE, IDLE, 0, LATE, 0, 0]


def test_time_thresholds_and_switching_off():
    thresholds = Thresholds(early_allocation=Threshold(ns=9, percent=None),
                            late_deallocation=Threshold(ns=None, percent=None),
                            temporary_idleness=Threshold(ns=15, percent=None))
    got = inefficient_flags(BLOCKS, end_t=200, thresholds=thresholds).to_list()
    assert got == [EARLY, EARLY | IDLE, IDLE, EARLY, EARLY, 0, 0]


def test_empty():
    assert inefficient_flags(BLOCKS.head(0), end_t=None).len() == 0
