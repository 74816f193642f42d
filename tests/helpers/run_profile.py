"""How much of the long tests a run does: the short profile (the default, what CI runs) or
the long one (``MEMTUI_TEST_PROFILE=long``, docs/development.md).

Every test runs in both profiles; the short one shrinks the long cases (marked ``slow``):
the real-capture sweeps of the UI open one representative capture of each kind of file
(:func:`real_captures`) instead of every capture, parameter grids are covered pairwise
(:func:`pairwise`: every value of each parameter at least once, not every combination),
a test pinned at several terminal sizes runs at the one it names (:func:`sizes`), and
generated sizes and monkey steps are smaller (:func:`by_profile`); the fuzzing follows
``MEMTUI_TEST_PROFILE`` unless ``MEMTUI_FUZZ_PROFILE`` says otherwise (tests/fuzz/harness.py).
The long profile runs every combination at full size.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

PROFILE = os.environ.get("MEMTUI_TEST_PROFILE", "short")
LONG = PROFILE == "long"

#: The real captures of ../shared/data the short profile opens in the UI: one of each kind
#: a source tells apart (a snapshot with a long trace, a list-form pickle with no events;
#: msMemScope CSV, SQLite of the host alone, the .dat mirror with three devices; msprof and
#: PyTorch profiler databases; profiler CSVs of memory records and of operators with
#: nothing to draw).  A name that is gone is left out.  Every capture is still read in the
#: short profile by the sweeps below the UI (tests/sources, tests/analysis, tests/cli).
REPRESENTATIVE = (
    "t26_cs336_kk_ctx512_fullstep.pickle",
    "t22_layoutediting_memory_snapshot_list_413b2eb.pkl",
    "test__smoke__testfile__csvfile__memscope_dump_20250428113810.csv",
    "msinsight__host_pinned__memscope_dump_20260527062213.db",
    "msinsight_mirror__full_db__leaks_dump_2025.dat",
    "fulldb__msprof_0.db",
    "pt_db_l0_rank0__ascend_pytorch_profiler_0.db",
    "pt_st_l2_rank0__memory_record.csv",
    "pt_text_l1_rank0__operator_memory.csv",
)


def by_profile(short: T, long: T) -> T:
    """``long`` under ``MEMTUI_TEST_PROFILE=long``, else ``short``."""
    return long if LONG else short


def real_captures(paths: Iterable[Path]) -> list[Path]:
    """All of ``paths`` in the long profile; in the short one those named in
    :data:`REPRESENTATIVE` (all of them again where none of those names is there, so a
    renamed data folder never turns a sweep into nothing)."""
    paths = sorted(paths)
    if LONG:
        return paths
    chosen = [p for p in paths if p.name in REPRESENTATIVE]
    return chosen or paths


def pairwise(first: Sequence, second: Sequence) -> list[tuple]:
    """Every ``(a, b)`` in the long profile; in the short one each value of the longer
    sequence once, paired with the other's values in turn (every value of both is met)."""
    if LONG:
        return list(itertools.product(first, second))
    count = max(len(first), len(second))
    return [(first[i % len(first)], second[i % len(second)]) for i in range(count)]



def sizes(every: Sequence[tuple[int, int]], short: tuple[int, int]) -> list[tuple[int, int]]:
    """Terminal sizes for a test pinned at several: ``every`` one in the long profile, the
    one named ``short`` in the short profile (each test names the size that matters most
    to it, so that the short profile still meets every size across the file)."""
    assert short in every, (short, every)
    return list(every) if LONG else [short]
