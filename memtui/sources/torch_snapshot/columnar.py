"""Which snapshot reader runs, and the compiled reader's traces as columns.

:func:`read_columnar` runs the compiled reader (``_reader.c``, built where a compiler was
found at install) on a snapshot pickle: the snapshot comes back as ``pickle.load`` would
give it, except that each list of ``device_traces`` is a :class:`ColumnTrace`, the trace's
entries as typed columns that never were dicts.  It returns None (and the caller reads the
file with the safe Python unpickler, which gives every warning and error) where the
extension is missing, ``MEMTUI_PURE_PYTHON=1`` is set, or the file holds anything the
compiled reader leaves to Python (see the C source's comment): the two readers give
identical models on every file, which tests/sources/test_snapshot_readers.py checks.

A :class:`ColumnTrace` stands where the builder expects a list of entry dicts: ``len``,
``trace[i]`` and ``trace[:k]`` (one dict rebuilt from the columns: the builder reads a
few rows, markers and pools), :meth:`ColumnTrace.values` (one key's values) and
:meth:`ColumnTrace.columns` (the checked columns, as :func:`validate.trace_columns` gives
them for a list).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from memtui.sources.common import safe_pickle
from memtui.sources.common.files import open_regular
from memtui.sources.common.safe_pickle import memory_bounded
from memtui.sources.torch_snapshot.reader_choice import (
    PURE_PYTHON_ENV,
    compiled_available,
    compiled_enabled,
    compiled_reader,
    reader_in_use,
)

if TYPE_CHECKING:
    from memtui.sources.torch_snapshot.trace_columns import TraceColumns

__all__ = ["PURE_PYTHON_ENV", "ColumnTrace", "compiled_available", "compiled_enabled",
           "read_columnar", "reader_in_use"]

#: Why the last file was left to the Python reader (None: the compiled one read it).
last_fallback: str | None = None


def read_columnar(path: Path, listener: Callable[[int, int], None] | None = None
                  ) -> Any | None:
    """The snapshot at ``path`` with its traces as :class:`ColumnTrace`, or None where the
    Python reader must read it (module docstring).  ``listener(bytes_read, size)`` hears
    how far it has read, as the Python reader's does (:func:`_hearing`)."""
    global last_fallback
    if not compiled_enabled():
        last_fallback = "compiled reader off"
        return None
    try:
        fh = open_regular(path)
    except OSError:
        last_fallback = "cannot open"
        return None
    try:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            last_fallback = "empty"
            return None
        try:
            with memory_bounded(size):
                data, reason = compiled_reader().read(fh.fileno(), size, _hearing(listener))
        except MemoryError:
            data, reason = None, "memory bound"
    finally:
        fh.close()
    last_fallback = reason
    if data is None:
        return None
    traces = data.get("device_traces") if isinstance(data, dict) else None
    if isinstance(traces, list):
        raw = compiled_reader().RawColumns
        data["device_traces"] = [ColumnTrace(t) if isinstance(t, raw) else t for t in traces]
    return data


def _hearing(listener: Callable[[int, int], None] | None) -> Callable[[int, int], None] | None:
    """``listener`` as the Python reader calls it: every ``REPORT_EVERY`` seconds at most
    (the reader calls after each chunk), the end always; a listener's failure never stops
    the load."""
    if listener is None:
        return None
    last = [-1e9]

    def hear(done: int, size: int) -> None:
        now = time.monotonic()
        if done < size and now - last[0] < safe_pickle.REPORT_EVERY:
            return
        last[0] = now
        with contextlib.suppress(Exception):  # as safe_pickle's watcher: the load goes on
            listener(done, size)
    return hear


#: Typed fields in the order of their 2-bit states (``_reader.c``'s ``FIELD_NAMES``).
_FIELDS = ("action", "addr", "size", "stream", "time_us", "frames")
_STATE_ABSENT, _STATE_NONE, _STATE_VALUE = 0, 1, 2
_NUMBERS = {"addr": (np.uint64, pl.UInt64), "size": (np.int64, pl.Int64),
            "stream": (np.int64, pl.Int64), "time_us": (np.int64, pl.Int64)}


class ColumnTrace:
    """One device trace read by the compiled reader (module docstring)."""

    def __init__(self, raw) -> None:
        self._raw = raw
        self._len = raw.rows
        self._arrays: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def clear(self) -> None:
        """Let go of the buffers (the builder's frames keep what they use)."""
        self._raw = None
        self._arrays = {}
        self._len = 0

    # -- columns -------------------------------------------------------------------------

    def _state(self, field: str) -> np.ndarray:
        return (self._array("state") >> (2 * _FIELDS.index(field))) & 3

    def _array(self, field: str) -> np.ndarray:
        """A column buffer as a numpy array over the same memory (no copy)."""
        array = self._arrays.get(field)
        if array is None:
            dtype = {"state": np.uint16, **{k: v[0] for k, v in _NUMBERS.items()}}.get(
                field, np.int32)
            array = self._arrays[field] = np.frombuffer(getattr(self._raw, field), dtype=dtype)
        return array

    def _number_series(self, field: str, all_valid: bool = False) -> pl.Series:
        values = pl.Series(field, self._array(field), _NUMBERS[field][1])
        if all_valid:
            return values
        valid = self._state(field) == _STATE_VALUE
        if valid.all():
            return values
        return pl.select(pl.when(pl.Series(valid)).then(values).alias(field)).to_series()

    def _all_values(self, fields: tuple[str, ...] | list[str]) -> bool:
        """Whether every entry has a value in every one of ``fields`` (one pass over the
        states, not one per field: the usual file)."""
        mask = want = 0
        for field in fields:
            mask |= 3 << (2 * _FIELDS.index(field))
            want |= _STATE_VALUE << (2 * _FIELDS.index(field))
        return bool(np.all((self._array("state") & np.uint16(mask)) == want))

    def columns(self) -> TraceColumns:
        """The checked columns (every entry was checked while read: a bad one sends the
        file to the Python reader), stacks as codes into the distinct frame lists."""
        from memtui.sources.torch_snapshot.trace_columns import TraceColumns

        all_valid = self._all_values(list(_NUMBERS))
        return TraceColumns(
            action=None,  # (the texts where wanted: TraceColumns.actions)
            **{field: self._number_series(field, all_valid) for field in _NUMBERS},
            frames=[],
            frame_codes=self._array("frames"),
            frame_lists=self._raw.stacks,
            action_codes=self._array("action"),
            action_names=self._raw.names,
        )

    # -- rows (few: markers, pools, the first thousand) -------------------------------------

    def _row(self, index: int) -> dict:
        if not -self._len <= index < self._len:
            raise IndexError("trace entry index out of range")
        index %= self._len
        raw = self._raw
        row: dict[str, Any] = {}
        state = int(self._array("state")[index])
        for position, field in enumerate(_FIELDS):
            kind = (state >> (2 * position)) & 3
            if kind == _STATE_ABSENT:
                continue
            if kind == _STATE_NONE:
                row[field] = None
            elif field == "action":
                row[field] = raw.names[int(self._array("action")[index])]
            elif field == "frames":
                row[field] = raw.stacks[int(self._array("frames")[index])]
            else:
                row[field] = int(self._array(field)[index])
        for key, present in raw.present.items():
            if present[index]:
                row[key] = raw.extras[key][index]
        return row

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self._row(i) for i in range(*index.indices(self._len))]
        return self._row(index)

    def __iter__(self):
        return (self._row(i) for i in range(self._len))

    def values(self, key: str) -> list:
        """``entry.get(key)`` of every entry, in order."""
        if key in self._raw.extras:
            return list(self._raw.extras[key])
        if key not in _FIELDS:
            return [None] * self._len
        if key == "action":
            return [self._raw.names[code] for code in self._array("action").tolist()]
        if key == "frames":
            stacks = self._raw.stacks
            return [None if code < 0 else stacks[code] for code in self._array(key).tolist()]
        return self._number_series(key).to_list()
