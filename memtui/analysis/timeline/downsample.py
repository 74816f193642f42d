"""Downsampling a step function to a few bins for drawing: the min and max per bin.

A level (allocated, reserved, a profiler curve) is a step function given by sorted times
``t`` and the value that holds from each of them.  To draw it ``n`` columns wide over the
view ``[t0, t1]`` each column needs the lowest and highest level held anywhere in its time
bin, so that no peak or dip narrower than a column disappears (min-max downsampling, what
memory_viz and MindStudio Insight do for long captures).  When zoomed in until a bin
holds at most one change, this is the exact curve.

Bin ``i`` covers the times ``x`` with ``floor((x - t0) * n / (t1 - t0)) == i`` (the last
bin also holds ``t1``).  Its range covers the level entering the bin (the last value set
before its first change, which draws the step as a vertical line) and every value set in
it, including transient ones at a shared timestamp, so the peak of the level is always the
top of some column.  Everything is numpy: ``O(log N)`` to find the view in the level, and
``O(k)`` for the ``k`` changes inside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Bins:
    """Per-bin ``lo``/``hi`` of a level over ``n`` bins; ``known`` is False where the bin
    lies before the level's first point (nothing to draw there)."""

    lo: np.ndarray
    hi: np.ndarray
    known: np.ndarray

    @property
    def n(self) -> int:
        return int(self.lo.size)


def bin_of(x: np.ndarray, t0: int, t1: int, n: int) -> np.ndarray:
    """The bin index of each time in ``x`` (clipped to ``[0, n - 1]``)."""
    span = max(int(t1) - int(t0), 1)
    offset = np.asarray(x, dtype=np.int64) - np.int64(t0)
    if span * n < (1 << 62):
        bins = offset * np.int64(n) // np.int64(span)
    else:  # spans too long for exact int64 arithmetic: float is within a bin
        bins = np.floor(offset.astype(np.float64) * (n / span)).astype(np.int64)
    return np.clip(bins, 0, n - 1)


def bin_start(i: np.ndarray | int, t0: int, t1: int, n: int) -> np.ndarray:
    """The first time that falls into bin ``i`` (the inverse of :func:`bin_of`)."""
    span = max(int(t1) - int(t0), 1)
    i = np.asarray(i, dtype=np.int64)
    if span * n < (1 << 62):
        return np.int64(t0) + (i * np.int64(span) + n - 1) // np.int64(n)
    return np.int64(t0) + np.ceil(i.astype(np.float64) * (span / n)).astype(np.int64)


def minmax_bins(t: np.ndarray, values: np.ndarray, t0: int, t1: int, n: int) -> Bins:
    """Min and max of the step function ``(t, values)`` in each of ``n`` bins of ``[t0, t1]``."""
    n = max(int(n), 1)
    lo = np.zeros(n, dtype=np.int64)
    hi = np.zeros(n, dtype=np.int64)
    known = np.zeros(n, dtype=bool)
    if t.size == 0:
        return Bins(lo, hi, known)
    t1 = max(int(t1), int(t0))
    # The changes inside the view: [a, b).
    a = int(np.searchsorted(t, t0, side="left"))
    b = int(np.searchsorted(t, t1, side="right"))
    inside_t = t[a:b]
    inside_v = values[a:b]
    # The level entering each bin: the last change before the bin's first time.  Bins
    # with neither an entering level nor a change lie before the first point.
    starts = bin_start(np.arange(n), t0, t1, n)
    entering = np.searchsorted(t, starts, side="left") - 1
    has_entering = entering >= 0
    lo[has_entering] = values[entering[has_entering]]
    hi[has_entering] = values[entering[has_entering]]
    known[has_entering] = True
    if inside_t.size:
        # The changes are sorted, so each bin's changes are one run: find where the runs
        # start instead of binning every change.
        firsts = np.searchsorted(inside_t, starts, side="left")
        ends = np.append(firsts[1:], inside_t.size)
        occupied = np.flatnonzero(ends > firsts)
        run_starts = firsts[occupied]
        seg_lo = np.minimum.reduceat(inside_v, run_starts)
        seg_hi = np.maximum.reduceat(inside_v, run_starts)
        prior = known[occupied]
        lo[occupied] = np.where(prior, np.minimum(lo[occupied], seg_lo), seg_lo)
        hi[occupied] = np.where(prior, np.maximum(hi[occupied], seg_hi), seg_hi)
        known[occupied] = True
    return Bins(lo, hi, known)


def value_at(t: np.ndarray, values: np.ndarray, x: int, default: int = 0) -> int:
    """The level at time ``x``: the value set by the last change at or before ``x``;
    ``default`` before the first sample (a profiler curve that starts 0.12 s into the run
    is not yet drawn at +0: its first sample is not held backwards in time)."""
    index = int(np.searchsorted(t, x, side="right")) - 1
    if index < 0 or not values.size:
        return default
    return int(values[index])


__all__ = ["Bins", "bin_of", "bin_start", "minmax_bins", "value_at"]
