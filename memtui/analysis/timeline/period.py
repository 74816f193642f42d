"""Steps from the period of the whole allocation signal, for loops no one stack keeps.

A training step allocates its activations, gradients and temporaries and frees them
again by its end; what it allocates may change from step to step (a mixture of experts
routes each token to the expert the data picks, sequence lengths vary, an evaluation runs
every few steps), so no single call stack need recur as often in every step.  What does
recur is the shape of the device's *transient level*: the bytes of the blocks the trace
both allocates and frees, summed over its allocations and frees in event order (blocks
never freed, a leak among them, are left out, so the level returns to the same floor at
the end of every step).  Its period is the step's length in events:

* :func:`candidate_periods`: the lags (in events) at which the transient level's
  autocorrelation peaks, at least :data:`MIN_CORRELATION` high and
  :data:`MIN_PROMINENCE` above the lowest point before them, shortest first.  Long
  traces are read in a window of :data:`WINDOW` events in their middle (short periods)
  and as :data:`WINDOW` means of equal runs of events (long ones);
* :func:`troughs`: for one lag, where steps end: the lowest point of each period (the
  event that brought the level to it), followed from one to the next (at least half a period, at
  most one and a half after the last), so steps whose length varies are followed
  without drifting; the next step begins with the next event;
* :func:`returns_to_floor`: whether those troughs are steps' ends: nearly all of them as
  low as the troughs beside them.  The end of a micro-batch keeps its gradients for
  the next, the end of a layer its activations for the backward: a step frees all.
  The shortest lag whose troughs pass is the period (an evaluation every fifth step
  recurs at five steps, more strongly than the step itself);
* :func:`floor_troughs`: where the steps' lengths vary too much for the autocorrelation
  to peak (the data decides how much each step allocates), the steps are the visits
  away from the floor and back, a short one (an evaluation after a step) joining the
  step before it;
* :func:`whole_steps`: where the troughs fall in two levels, the lower one at the end
  of every step and the same number of upper ones between (the gradients micro-batches
  keep are freed at the step's end), only the lower ones end steps;
* :func:`periodic_steps`: all of them, over the allocation and free events of a device.

No Python loop over events: the autocorrelation is an FFT, the floor a rolling minimum;
only the candidate lags and the steps found are walked one by one.
"""

from __future__ import annotations

import numpy as np
import polars as pl

#: Shortest period (in allocation and free events) that counts as a step.
MIN_PERIOD = 4
#: At least this many periods must fit in the trace.
MIN_PERIODS = 4
#: Longest signal the autocorrelation reads at once (a window, or means of runs).
WINDOW = 1 << 17
#: Height of an autocorrelation peak, and its rise above the lowest point before it.
MIN_CORRELATION = 0.35
MIN_PROMINENCE = 0.3
#: Lags tried as the period, shortest first.
MAX_CANDIDATES = 12
#: A trough is followed by the next between these shares of a period after it.
NEXT_TROUGH = (0.5, 1.5)
#: The floor: within this share of a period's swing above the lowest point around it;
#: two floors as low as each other: within this share.
NEAR_FLOOR = 0.05
SAME_FLOOR = 0.001
#: Share of the troughs that must reach the floor, and how close (a share of a step's
#: rise above its trough).
FLOOR_SHARE = 0.9
FLOOR_TOLERANCE = 0.1
#: Without a period: a visit away from the floor shorter than this share of the usual one
#: joins the step before it; the visits' lengths may vary by this much of their mean.
SHORT_VISIT = 0.35
MAX_VISIT_CV = 0.6
#: How much lower (of a step's rise) a step's own trough lies than its micro-batches',
#: and the share of steps with the usual number of micro-batches (an evaluation every
#: few steps adds a trough at the floor).
MICRO_MARGIN = 0.002
MICRO_SHARE = 0.75


def transient_level(actions: np.ndarray, sizes: np.ndarray, freed: np.ndarray) -> np.ndarray:
    """The transient level after each row: ``+size`` at an allocation whose block is
    freed in the trace (``freed``), ``-size`` at a free of such a block, 0 otherwise
    (``actions``: 1 alloc, -1 free, 0 other)."""
    # one float array, worked in place (a product, a where and a cast wrote three more);
    # a size times +-1 or 0 is exact in float64 as it was in int64
    signed = actions.astype(np.float64)
    signed *= sizes
    signed[~freed] = 0.0
    return np.cumsum(signed, out=signed)


def _autocorrelation(x: np.ndarray, max_lag: int) -> np.ndarray:
    """Autocorrelation of ``x`` for lags ``0..max_lag`` (each lag's sum divided by the
    pairs it has, over the variance)."""
    x = x - x.mean()
    n = x.size
    size = 1 << int(np.ceil(np.log2(2 * n)))
    spectrum = np.fft.rfft(x, size)
    acf = np.fft.irfft(spectrum * np.conj(spectrum), size)[: max_lag + 1]
    if acf[0] <= 0:
        return np.zeros(max_lag + 1)
    pairs = n - np.arange(max_lag + 1)
    return (acf / pairs) / (acf[0] / n)


def _good_lags(r: np.ndarray, min_lag: int) -> list[int]:
    """The peaks of autocorrelation ``r`` a period makes (module docstring), shortest
    first, from ``min_lag`` on.  Where the level swings faster than ``min_lag`` (a
    temporary allocated and freed over and over), the multiples of that swing are its
    echoes, not periods: a longer lag counts only where it stands above the echoes beside
    it."""
    if r.size <= min_lag + 1:
        return []
    inner = np.arange(1, r.size - 1)
    peaks = inner[(r[inner] > r[inner - 1]) & (r[inner] >= r[inner + 1])]
    dip = np.minimum.accumulate(r)  # the lowest point before each lag
    good = peaks[(r[peaks] >= MIN_CORRELATION) & (r[peaks] - dip[peaks] >= MIN_PROMINENCE)]
    fast = good[good < min_lag]
    good = good[good >= min_lag]
    if fast.size:
        swing = int(fast[0])
        beside = np.maximum(r[good - swing], r[np.minimum(good + swing, r.size - 1)])
        good = good[r[good] >= beside + MIN_PROMINENCE / 2]
    return [int(lag) for lag in good]


def candidate_periods(x: np.ndarray) -> list[float]:
    """The lags (in rows; multiples of a run's length where read from means of runs) at
    which ``x`` recurs, shortest first, at most :data:`MAX_CANDIDATES`."""
    n = x.size
    if n < MIN_PERIOD * MIN_PERIODS * 2:
        return []
    if n <= WINDOW:
        lags = _good_lags(_autocorrelation(x, n // MIN_PERIODS), MIN_PERIOD)
        return [float(lag) for lag in lags][:MAX_CANDIDATES]
    start = (n - WINDOW) // 2
    short = _good_lags(_autocorrelation(x[start:start + WINDOW], WINDOW // MIN_PERIODS),
                       MIN_PERIOD)
    run = n // WINDOW + 1
    means = x[: (n // run) * run].reshape(-1, run).mean(axis=1)
    long = [lag * run for lag in _good_lags(
        _autocorrelation(means, means.size // MIN_PERIODS), MIN_PERIOD)
        if lag * run > WINDOW // MIN_PERIODS]  # beyond what the window sees
    return [float(lag) for lag in short + long][:MAX_CANDIDATES]


def run_lows(x: np.ndarray, on: np.ndarray) -> np.ndarray:
    """Per run of consecutive rows where ``on`` holds, the row where ``x`` first reaches
    the run's lowest value: a step ends when what it allocated is freed again (what is
    allocated there and never freed, left out of the level, is the next step's)."""
    rows = np.flatnonzero(on)
    if rows.size == 0:
        return rows
    begins = np.concatenate(([True], np.diff(rows) > 1))
    run = np.cumsum(begins) - 1
    values = x[rows]  # taken once, not twice
    lowest = np.minimum.reduceat(values, np.flatnonzero(begins))
    del begins
    at_low = np.flatnonzero(values == lowest[run])
    del values
    first = np.concatenate(([True], np.diff(run[at_low]) > 0))
    return rows[at_low[first]]


def troughs(x: np.ndarray, period: float) -> np.ndarray:
    """Rows after which a step ends: the floor of each period of ``x``, followed one
    period after the other (module docstring).  The floor is what lies within
    :data:`NEAR_FLOOR` of a period's swing above the lowest point around it (a few bytes
    allocated and freed at the floor do not move it); where no floor follows a trough
    within one and a half periods (a start-up, a pause), the next floor after that."""
    width = max(3, int(period / 2) | 1)
    series = pl.Series(x)
    whole = max(3, int(period) | 1)
    spread = series.rolling_max(window_size=whole, min_samples=1).to_numpy() \
        - series.rolling_min(window_size=whole, min_samples=1).to_numpy()
    swing = float(np.median(spread, overwrite_input=True))  # (sorted in place: no copy)
    del spread
    near = series.rolling_min(window_size=width, center=True, min_samples=1).to_numpy() \
        + NEAR_FLOOR * swing
    on = x <= near
    del near
    low = run_lows(x, on)
    del on
    if low.size == 0:
        return np.zeros(0, dtype=np.int64)
    first = np.flatnonzero(low < max(period, 1))
    at = int(first[np.argmin(x[low[first]])]) if first.size else 0  # (an index into low)
    # each floor's window for the next one, for every floor at once (the walk below
    # visits one a step: nearly always a window of one floor, taken as it is)
    lo_share, hi_share = NEXT_TROUGH
    lo_of = np.searchsorted(low, low + lo_share * period, side="left").tolist()
    hi_of = np.searchsorted(low, low + hi_share * period, side="right").tolist()
    rows, level = low.tolist(), x[low].tolist()
    same = SAME_FLOOR * swing
    ends = [at]
    while True:  # one pass per step found, never per event
        lo, hi = lo_of[at], hi_of[at]
        if lo >= len(rows):
            break
        if hi - lo > 1:  # the lowest floor, of floors as low the one nearest a period on
            lowest = min(level[lo:hi])
            goal = rows[at] + period
            at = min((i for i in range(lo, hi) if level[i] <= lowest + same),
                     key=lambda i: abs(rows[i] - goal))
        else:  # one floor in the window, or none before the next floor
            at = lo
        ends.append(at)
    return low[ends]


def returns_to_floor(x: np.ndarray, ends: np.ndarray) -> bool:
    """Whether at least :data:`FLOOR_SHARE` of the troughs ``ends`` are as low as the
    troughs beside them (give or take :data:`FLOOR_TOLERANCE` of the median rise between
    two troughs).  The first and the last are left out: a trace starts and stops where it
    will (what the recording freed at its end, or kept from before its start)."""
    inner = ends[1:-1]
    if inner.size < MIN_PERIODS - 1:
        return False
    highs = np.maximum.reduceat(x, ends)[:-1]  # the highest point between two troughs
    rise = float(np.median(highs - x[ends[:-1]]))
    if rise <= 0:
        return False
    level = x[inner]
    beside = np.minimum(np.concatenate(([np.inf], level[:-1])),
                        np.concatenate((level[1:], [np.inf])))
    return float(np.mean(level <= beside + FLOOR_TOLERANCE * rise)) >= FLOOR_SHARE


def floor_troughs(x: np.ndarray) -> np.ndarray | None:
    """Where steps end when their lengths vary too much for a period to show: the level
    leaves and regains its floor (within :data:`NEAR_FLOOR` of its swing above its lowest
    point) once a step; of troughs less than :data:`SHORT_VISIT` of the usual visit
    apart (the optimizer's temporaries, an evaluation pass, the next step's first
    tensors near the floor) the lowest ends the step.  None unless at least
    :data:`MIN_PERIODS` visits, usually :data:`MIN_PERIOD` rows long or more (not one
    temporary allocated and freed), of lengths varying by at most :data:`MAX_VISIT_CV`
    of their mean, cover most of the trace."""
    floor = float(x.min())
    swing = float(np.quantile(x, 0.95)) - floor
    if swing <= 0:
        return None
    ends = run_lows(x, x <= floor + NEAR_FLOOR * swing)
    if ends.size < MIN_PERIODS + 1:
        return None
    # troughs a short visit apart (the optimizer's temporaries, an evaluation, the
    # next step's first tensors near the floor) are one step's end: its lowest
    gap = np.diff(ends)
    group = np.cumsum(np.concatenate(([1], gap >= SHORT_VISIT * np.median(gap))))
    order = np.lexsort((ends, x[ends], group))
    ends = np.sort(ends[order][np.concatenate(([True], np.diff(group[order]) > 0))])
    length = np.diff(ends)
    if ends.size < MIN_PERIODS + 1 or ends[-1] - ends[0] < 0.5 * x.size \
            or np.median(length) < MIN_PERIOD or length.std() > MAX_VISIT_CV * length.mean():
        return None
    return ends


def _two_levels(values: np.ndarray) -> tuple[float, float] | None:
    """The split of ``values`` in two levels that parts them best (the largest variance
    between the levels, Otsu's rule): the highest value of the lower level and the lowest
    of the upper one; None where all are equal."""
    ordered = np.sort(values).astype(np.float64)
    n = ordered.size
    if n < 2 or ordered[0] == ordered[-1]:
        return None
    below = np.arange(1, n)  # values in the lower level, for a split after each
    total = np.cumsum(ordered)[:-1]
    mean_low = total / below
    mean_high = (ordered.sum() - total) / (n - below)
    between = below * (n - below) * (mean_high - mean_low) ** 2
    split = int(np.argmax(between))
    return float(ordered[split]), float(ordered[split + 1])


def whole_steps(x: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``ends`` without the ends of micro-batches: where the troughs fall in two levels
    (:func:`_two_levels`, at least :data:`MICRO_MARGIN` of a step's rise apart) and
    every lower trough is followed by the same number of upper ones (in at least
    :data:`MICRO_SHARE` of the steps), the upper ones end micro-batches: the gradients
    the first micro-batch allocated stay until the step's end.  Troughs that differ by
    chance do not alternate so."""
    if ends.size < 2 * MIN_PERIODS:
        return ends
    values = x[ends]
    rise = float(np.median(np.maximum.reduceat(x, ends)[:-1] - values[:-1]))
    split = _two_levels(values)
    if rise <= 0 or split is None or split[1] - split[0] < MICRO_MARGIN * rise:
        return ends
    deep = np.flatnonzero(values <= split[0])
    if deep.size < MIN_PERIODS:
        return ends
    between = np.diff(deep) - 1  # upper troughs between two lower ones
    usual = int(np.bincount(between).argmax())
    if usual < 1 or np.mean(between == usual) < MICRO_SHARE:
        return ends
    return ends[deep]


def _level_of(actions: np.ndarray, block: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The transient level over rows of allocations (``actions`` 1) and frees (-1) of
    blocks ``block`` (-1: none) of ``sizes``: only blocks both allocated and freed in
    them count."""
    count = int(block.max(initial=-1)) + 1
    known = block >= 0
    # a row without a block reads the extra last entry, never both allocated and freed
    ids = block if known.all() else np.where(known, block, count)
    del known
    both = np.zeros(count + 1, dtype=bool)  # allocated, then allocated and freed
    freed = np.zeros(count + 1, dtype=bool)
    both[ids[actions > 0]] = True
    freed[ids[actions < 0]] = True
    both &= freed
    both[count] = False
    return transient_level(actions, sizes, both[ids])


def periodic_steps(events: pl.DataFrame) -> tuple[np.ndarray, float] | None:
    """Row indexes (into ``events``, rising) where steps begin, from the period of the
    transient level (module docstring), and the period in rows of allocations and frees;
    None where the level does not recur at least :data:`MIN_PERIODS` times."""
    is_alloc = (events["action"] == "alloc").fill_null(False).to_numpy()
    rows = np.flatnonzero(is_alloc | (events["action"] == "free").fill_null(False).to_numpy())
    if rows.size < MIN_PERIOD * MIN_PERIODS * 2:
        return None
    picked = events.select("block_id", "size")[rows]
    block = picked["block_id"].fill_null(-1).to_numpy()
    sizes = picked["size"].fill_null(0).to_numpy()
    del picked
    signs = is_alloc[rows].view(np.int8)  # 1 an allocation, -1 a free (in place)
    signs *= 2
    signs -= 1
    x = _level_of(signs, block, sizes)
    del block, sizes
    for period in candidate_periods(x):
        ends = troughs(x, period)
        if ends.size >= MIN_PERIODS and (ends[-1] - ends[0]) >= 0.5 * rows.size \
                and returns_to_floor(x, ends):
            break
    else:
        ends = floor_troughs(x)
        if ends is None:
            return None
    ends = whole_steps(x, ends)
    if ends.size < MIN_PERIODS:
        return None
    period = float(np.median(np.diff(ends)))
    # a step begins with the event after the one that brought the level to its floor
    # (what is allocated there and never freed, left out of the level, is the next
    # step's); the trace's first event too, where a whole step comes before the first
    # floor
    starts = rows[ends] + 1
    starts = starts[starts < events.height]
    allocs = np.flatnonzero(is_alloc)
    if starts.size and (allocs.size == 0 or allocs[-1] < starts[-1]):
        starts = starts[:-1]  # only frees follow the last floor: no step begins there
    if ends[0] >= 0.75 * period:
        starts = np.concatenate(([0], starts))
    return starts.astype(np.int64), period


__all__ = ["candidate_periods", "floor_troughs", "periodic_steps", "returns_to_floor",
           "transient_level", "troughs", "whole_steps"]
