"""Array helpers shared by the sources and the analyses (numpy only, no frames).

:func:`unique_sorted` stands in for a bare ``np.unique(values)``: since numpy 2.3 that call
finds the distinct values with a hash table before sorting them, which on this project's
machine took 0.7 s per million int64 values (numpy 2.4.6), a hundred times a sort.  On a
10M-event capture the Blocks screen's level waited 7 s on it.  ``np.unique`` with
``return_index``/``return_inverse``/``return_counts`` still sorts, and needs no stand-in.

:func:`with_first` makes a level's array, its start point before its events' values.
"""

from __future__ import annotations

import numpy as np


def unique_sorted(values: np.ndarray) -> np.ndarray:
    """The distinct values of ``values`` in ascending order (what ``np.unique`` returns),
    found by sorting a flat copy; NaNs (float) are kept one, as ``np.unique`` keeps them."""
    ordered = np.sort(np.asarray(values).ravel())
    if ordered.size == 0:
        return ordered
    keep = np.empty(ordered.size, dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    if ordered.dtype.kind in "fc" and np.isnan(ordered[-1]):
        first_nan = int(np.argmax(np.isnan(ordered)))
        keep[first_nan + 1:] = False
        keep[first_nan] = True
    return ordered[keep]


def with_first(first: int, values: np.ndarray) -> np.ndarray:
    """``[first, *values]`` as int64, in one copy (a level's start point before its
    events' values; a concatenate and a cast wrote out two copies of millions)."""
    out = np.empty(values.size + 1, dtype=np.int64)
    out[0] = first
    out[1:] = values
    return out
