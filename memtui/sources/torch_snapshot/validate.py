"""Checking an unpickled snapshot before any of it reaches polars or a format string.

A pickle can hold anything where a snapshot holds numbers and strings: a list that
contains itself, a million-deep list (polars overflows its stack converting it), a huge
structure shared a thousand times (a 290-byte file whose ``device`` prints as gigabytes),
negative sizes, addresses past 2**64.  :func:`clean_snapshot` runs between unpickling and
building, in place:

* refuses (a :class:`CaptureError`) a snapshot whose entries far outnumber what a file of
  its size can hold: shared references expanded (one segment listed a thousand times);
* drops trace entries, segments and annotations whose values are missing, of the wrong
  type or impossible, and says how many in the returned warnings.

Checking a trace and turning it into columns are one step (:func:`trace_columns`): each
key's values are taken out of the dicts once, their types checked in one C-level pass,
and the typed column built from them gives the lowest and highest value at C speed; the
builder then uses those columns and never walks the dicts again.  Only a trace with a bad
value is filtered entry by entry, and its columns taken again.
"""

from __future__ import annotations

from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import NamedTuple

import polars as pl

from memtui.errors import CaptureError
from memtui.sources.torch_snapshot.columnar import ColumnTrace
from memtui.sources.torch_snapshot.trace_columns import TraceColumns

#: A trace entry or block takes at least this many bytes of pickle when it is not a shared
#: reference (a dict of 4+ keys, each memoised key 2 bytes, each value 2+): real files
#: spend 20 or more.  More entries than ``size / BYTES_PER_ENTRY`` were expanded.
BYTES_PER_ENTRY = 8
ENTRY_ALLOWANCE = 4096

_SIZE_MAX = 2**62
_ADDR_MAX = 2**64
_INT64 = 2**63
_TIME_US_MAX = 2**63 // 1000  # time_us * 1000 must fit int64 ns
#: Trace entry keys -> (types allowed, lowest, highest allowed + 1, required).
_ENTRY_INTS = {
    "size": (0, _SIZE_MAX, True),
    "addr": (0, _ADDR_MAX, False),
    "stream": (-_INT64, _INT64, False),
    "time_us": (0, _TIME_US_MAX, False),
}
#: Trace entry keys with integers -> their column's type.
_INT_DTYPES = {"addr": pl.UInt64, "size": pl.Int64, "stream": pl.Int64, "time_us": pl.Int64}
_SHORT_TEXT = 1000
_NONE = type(None)


class CheckedSnapshot(NamedTuple):
    """What :func:`clean_snapshot` found: the warnings to show, and the columns of each
    trace it checked, keyed by the ``id`` of the trace list (the list stays alive)."""

    warnings: list[str]
    columns: dict[int, TraceColumns]


def clean_snapshot(path: Path, snapshot: dict, file_size: int) -> CheckedSnapshot:
    """Check ``snapshot`` (see the module docstring); the warnings to show and the
    columns of its traces."""
    before = _refuse_expanded(path, snapshot, file_size)
    warnings: list[str] = []
    columns: dict[int, TraceColumns] = {}
    for key in ("device_traces", "host_traces"):
        traces = snapshot.get(key) or []
        if not isinstance(traces, list):
            snapshot[key] = []
            warnings.append(f"'{key}' is not a list: ignored")
            continue
        if traces and not is_trace(traces[0]):
            traces = [traces]  # host_traces may be one flat list of entries
        for index, trace in enumerate(traces):
            if isinstance(trace, ColumnTrace):  # checked while it was read
                columns[id(trace)] = trace.columns()
            elif isinstance(trace, list):
                dropped, columns[id(trace)] = clean_trace(trace)
                if dropped:
                    warnings.append(f"{key}[{index}]: {dropped} trace entries with missing or "
                                    "impossible values (negative or non-number sizes, "
                                    "addresses past 2**64, values of the wrong type) skipped")
    for key in ("segments", "host_segments"):
        segments = snapshot.get(key) or []
        if isinstance(segments, list):
            dropped = _keep(segments, _segment_ok)
            if dropped:
                warnings.append(f"{dropped} {key} with missing or impossible values (a "
                                "negative size, blocks of the wrong type) skipped")
    notes = snapshot.get("external_annotations")
    if notes is not None:
        if not isinstance(notes, list):
            snapshot["external_annotations"] = []
        elif _keep(notes, _annotation_ok):
            warnings.append("malformed external annotations skipped")
    if warnings and before and not _count_entries(snapshot):
        raise CaptureError(path, "malformed PyTorch memory snapshot: none of its trace entries "
                                 "or segments can be read (missing or impossible values)")
    return CheckedSnapshot(warnings, columns)


def is_trace(value: object) -> bool:
    """A device trace: a list of entries, or the compiled reader's columns of one."""
    return isinstance(value, list | ColumnTrace)


def short_text(value: object, default: str) -> str:
    """A label from the file: its text if it is a string or a number, else ``default``
    (never ``str()`` of a container, which a shared structure can make gigabytes long)."""
    if isinstance(value, str):
        return value[:_SHORT_TEXT] or default
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return default


def text_values(values: list) -> list[str | None] | None:
    """Labels from the file such as ``user_metadata``: each value a string (cut to
    1000 characters) or None where it is empty or not a string; None where no value is
    a non-empty string (one C-level pass in the common case)."""
    if set(map(type, values)) <= {str, type(None)}:
        if not any(values):
            return None
    elif not any(type(v) is str and v for v in values):
        return None
    return [v[:_SHORT_TEXT] if type(v) is str and v else None for v in values]


# -- the size of the object graph ---------------------------------------------------------


def _refuse_expanded(path: Path, snapshot: dict, file_size: int) -> int:
    """How many entries the snapshot holds; a CaptureError where far more than the file
    can hold."""
    entries = _count_entries(snapshot)
    allowed = file_size // BYTES_PER_ENTRY + ENTRY_ALLOWANCE
    if entries > allowed:
        raise CaptureError(
            path, f"its object graph is far larger than the file: {entries:,} trace entries "
            f"and blocks in {file_size:,} bytes (the same objects referenced over and over): "
            "refused")
    return entries


def _count_entries(snapshot: dict) -> int:
    """Trace entries, segments and blocks as the builder would walk them (lengths only)."""
    total = 0
    for key in ("device_traces", "host_traces"):
        traces = snapshot.get(key)
        if isinstance(traces, list):
            total += sum(len(t) if is_trace(t) else 1 for t in traces)
    for key in ("segments", "host_segments", "external_annotations"):
        items = snapshot.get(key)
        if isinstance(items, list):
            total += len(items)
            if key != "external_annotations":
                total += sum(len(blocks) for blocks in map(_blocks_of, items))
    return total


def _blocks_of(segment: object) -> list:
    blocks = segment.get("blocks") if isinstance(segment, dict) else None
    return blocks if isinstance(blocks, list) else []


# -- trace entries ------------------------------------------------------------------------


def clean_trace(trace: list) -> tuple[int, TraceColumns]:
    """Drop the entries of ``trace`` that cannot be read (in place); how many, and the
    columns of the entries kept."""
    columns = trace_columns(trace)
    if columns is not None:
        return 0, columns
    dropped = _keep(trace, _entry_ok)
    columns = trace_columns(trace)
    assert columns is not None, "every entry _entry_ok keeps makes a column"
    return dropped, columns


def trace_columns(trace: list) -> TraceColumns | None:
    """The columns of ``trace`` where every entry is a dict with a string action and
    integers in range (what :func:`_entry_ok` accepts), else None.

    Entries are taken ``_CHUNK`` at a time: every key of a chunk's entries is taken while
    those dicts are in the CPU cache (one pass per key over a million dicts would bring
    each in from memory once per key: a third slower), its values' types looked at in
    one C-level pass (polars must never see a container: a deep list overflows its
    stack) and turned into a typed piece of column at once, so that no more than a
    chunk of values is ever held as Python lists.
    """
    pieces: dict[str, list] = {key: [] for key in _DTYPES}
    frames: list = []
    try:
        for start in range(0, len(trace), _CHUNK):
            chunk = trace[start:start + _CHUNK]
            for key, getter in _GETTERS:
                got = _chunk_values(chunk, getter, key)  # TypeError: not a dict
                if set(map(type, got)) - _KINDS[key]:
                    return None
                if key == "frames":
                    frames += got
                else:  # strict: an integer past the column's type raises
                    pieces[key].append(pl.Series(key, got, _DTYPES[key], strict=True))
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
        return None
    columns = {key: _joined(key, parts) for key, parts in pieces.items()}
    for key, (low, high, required) in _ENTRY_INTS.items():
        column = columns[key]
        nulls = column.null_count()
        if required and nulls:
            return None
        if nulls < len(column) and not (low <= column.min() and column.max() < high):
            return None
    if columns["action"].null_count():
        return None
    return TraceColumns(frames=frames, **columns)


#: Entries taken out of the dicts per round (see :func:`trace_columns`).
_CHUNK = 8192
_KEYS = ("action", *_ENTRY_INTS, "frames")
_GETTERS = [(key, itemgetter(key)) for key in _KEYS]
#: The types each key's values may have (None: the entry lacks it, or says None).
_KINDS = {"action": {str, _NONE}, **{key: {int, _NONE} for key in _ENTRY_INTS},
          "frames": {list, _NONE}}
_DTYPES = {"action": pl.String, **_INT_DTYPES}


def _chunk_values(chunk: list, getter: itemgetter, key: str) -> list:
    """``entry[key]`` of every entry of ``chunk`` (None where an entry lacks it); a
    TypeError where an entry is not a dict."""
    try:
        return list(map(getter, chunk))
    except KeyError:  # an optional key some entries lack
        return list(map(dict.get, chunk, repeat(key)))


def _joined(key: str, parts: list[pl.Series]) -> pl.Series:
    """The pieces of one column as one column (its pieces kept: no copy)."""
    if not parts:
        return pl.Series(key, [], _DTYPES[key])
    return pl.concat(parts, rechunk=False) if len(parts) > 1 else parts[0]


def _entry_ok(entry: object) -> bool:
    if not isinstance(entry, dict) or type(entry.get("action")) is not str:
        return False
    for key, (low, high, required) in _ENTRY_INTS.items():
        value = entry.get(key)
        if value is None:
            if required:
                return False
        elif type(value) is not int or not low <= value < high:
            return False
    return type(entry.get("frames")) in (list, type(None))


# -- segments and annotations -------------------------------------------------------------


def _segment_ok(segment: object) -> bool:
    if not isinstance(segment, dict):
        return False
    if not _int_in(segment.get("address"), 0, _ADDR_MAX) or not _int_in(
            segment.get("total_size"), 0, _SIZE_MAX):
        return False
    if not _int_or_none_in(segment.get("stream"), -_INT64, _INT64) or not _int_or_none_in(
            segment.get("device"), 0, 1 << 20):
        return False
    if type(segment.get("segment_type")) not in (str, type(None)):
        return False
    pool = segment.get("segment_pool_id")
    if not (pool is None or type(pool) is int
            or (type(pool) in (list, tuple) and len(pool) <= 8
                and all(type(p) is int for p in pool))):
        return False
    blocks = segment.get("blocks", [])
    return isinstance(blocks, list) and all(map(_block_ok, blocks))


def _block_ok(block: object) -> bool:
    return (isinstance(block, dict) and _int_in(block.get("size"), 0, _SIZE_MAX)
            and type(block.get("state")) in (str, type(None))
            and _int_or_none_in(block.get("address"), 0, _ADDR_MAX)
            and _int_or_none_in(block.get("requested_size"), 0, _SIZE_MAX)
            and type(block.get("frames")) in (list, type(None))
            and type(block.get("history")) in (list, type(None)))


def _annotation_ok(note: object) -> bool:
    return (isinstance(note, dict) and type(note.get("name", "")) is str
            and type(note.get("stage", "")) is str
            and _int_or_none_in(note.get("device"), 0, 1 << 20)
            and _int_or_none_in(note.get("time_us"), 0, _TIME_US_MAX))


def _int_in(value: object, low: int, high: int) -> bool:
    return type(value) is int and low <= value < high


def _int_or_none_in(value: object, low: int, high: int) -> bool:
    return value is None or _int_in(value, low, high)


def _keep(items: list, ok) -> int:
    """Keep the items ``ok`` accepts, in place; how many were dropped."""
    kept = [item for item in items if ok(item)]
    dropped = len(items) - len(kept)
    if dropped:
        items[:] = kept
    return dropped
