"""Chrome trace-event JSON of a capture's memory, for Perfetto and ``chrome://tracing``.

One process per device (``pid`` 1, 2, ... named ``memtui DEVICE``), with counter tracks
``allocated`` and ``reserved`` and one per role holding bytes (``role parameter``, ``role
optimizer_state``, ...: memory by role, summing to allocated), bytes in ``args.bytes``,
one sample per distinct
timestamp (the level after the last event there), so each track's timestamps increase,
and only where the value changed (a counter holds until its next sample; the track's
first and last samples are always written).
Every finding with a time is an instant event on its device's process (``ph: "i"``, name
``KIND: title``, its severity, bytes and main figures in ``args``; thread ``findings``),
and every training step a slice (``ph: "X"``, thread ``steps``: the steps of ``memtui
compare``, from markers or the loop's rhythm).

Timestamps (``ts``) are microseconds on the capture's own clock (a snapshot's
``time_us``, msMemScope's and the profiler's nanoseconds / 1000), so a profiler trace of
the same run lines up; a capture without a clock counts one microsecond per event.  The
file is written in chunks of :data:`CHUNK` samples, formatted by polars: memory stays
bounded by a chunk, whatever the capture's size.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import numpy as np
import polars as pl

from memtui.analysis.findings.model import Finding
from memtui.analysis.timeline.levels import Level, allocated_level, reserved_level
from memtui.model import MemoryTrace
from memtui.outputs import atomic_file

CHUNK = 50_000
#: Figures of a finding's ``detail`` carried into its instant event's ``args``.
DETAIL_KEYS = ("bytes_per_step", "first_step_name", "requested_bytes", "largest_gap_bytes",
               "peak_allocated_bytes", "peak_reserved_bytes", "cause", "advice")


def _ts_ns(trace: MemoryTrace, t: np.ndarray) -> np.ndarray:
    """Times as int64 nanoseconds of the trace event clock (event numbers: 1 us each)."""
    t = np.asarray(t, dtype=np.int64)
    return t * 1000 if trace.meta.time_unit == "event" else t  # a view, for ns


def _ts_text(ns: pl.Expr) -> pl.Expr:
    """Microseconds with three decimals, as text (exact: no float rounding)."""
    return pl.concat_str([(ns // 1000).cast(pl.String), pl.lit("."),
                          (ns % 1000).cast(pl.String).str.zfill(3)])


def distinct_samples(trace: MemoryTrace, level: Level, start: int, stop: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``(ns, values)`` of ``level[start:stop]`` with one sample per distinct time: the
    last value set there (a time shared with the point after ``stop`` is left to the
    next chunk)."""
    ns = _ts_ns(trace, level.t[start:min(stop + 1, level.t.size)])
    values = np.asarray(level.values[start:stop])
    last = np.ones(stop - start, dtype=bool)
    last[: ns.size - 1] = ns[1:] != ns[:-1]
    return ns[: stop - start][last], values[last]


def _changes(values: np.ndarray, previous: int | None, keep_last: bool) -> np.ndarray:
    """Where a value differs from the one before it (``previous``: the last one written
    by the chunk before); the last sample too where ``keep_last`` (the track's end)."""
    before = np.empty_like(values)
    before[1:] = values[:-1]
    if values.size:
        before[0] = values[0] if previous is None else previous
    changed = values != before
    if values.size and previous is None:
        changed[0] = True
    if values.size and keep_last:
        changed[-1] = True
    return changed


def _counter_lines(trace: MemoryTrace, name: str, pid: int, level: Level
                   ) -> Iterable[tuple[int, str]]:
    """The counter samples as JSON objects: (samples, text) a chunk at a time (so only a
    chunk's arrays and text are ever held beside the level).  A sample that repeats the
    value before it is left out (a counter holds its value until the next sample)."""
    head = f'{{"name":"{name}","ph":"C","pid":{pid},"ts":'
    previous = None
    total = level.t.size
    for start in range(0, total, CHUNK):
        stop = min(start + CHUNK, total)
        ns, values = distinct_samples(trace, level, start, stop)
        keep = _changes(values, previous, keep_last=stop == total)
        if values.size:
            previous = int(values[-1])
        ns, values = ns[keep], values[keep]
        if ns.size == 0:
            continue
        chunk = pl.DataFrame({"ns": ns, "v": values.astype(np.int64, copy=False)})
        lines = chunk.select(pl.concat_str([pl.lit(head), _ts_text(pl.col("ns")),
                                            pl.lit(',"args":{"bytes":'),
                                            pl.col("v").cast(pl.String), pl.lit("}}")]))
        yield ns.size, lines.to_series().str.join(",\n").item()


def _instant(finding: Finding, pid: int, ns: int) -> str:
    args: dict[str, Any] = {"severity": finding.severity, "bytes": finding.bytes}
    args.update({k: finding.detail[k] for k in DETAIL_KEYS if k in finding.detail})
    stack = finding.evidence.stack
    if stack:
        args["stack"] = [f"{f.name} ({f.filename}:{f.line})" for f in stack[:8]]
    event = {"name": f"{finding.kind}: {finding.title}", "cat": "memtui.finding", "ph": "i",
             "s": "p", "pid": pid, "tid": 0, "ts": round(ns / 1000, 3), "args": args}
    return json.dumps(event)


def _metadata(pid: int, device: str, path: str) -> list[str]:
    return [json.dumps({"name": "process_name", "ph": "M", "pid": pid,
                        "args": {"name": f"memtui {device}"}}),
            json.dumps({"name": "process_labels", "ph": "M", "pid": pid,
                        "args": {"labels": path}}),
            json.dumps({"name": "thread_name", "ph": "M", "pid": pid, "tid": 0,
                        "args": {"name": "findings"}}),
            json.dumps({"name": "thread_name", "ph": "M", "pid": pid, "tid": 1,
                        "args": {"name": "steps"}})]


def _step_slices(trace: MemoryTrace, device: str, pid: int) -> list[str]:
    from memtui.analysis.across.compare import steps_of

    steps = steps_of(trace, device)
    if steps.is_empty():
        return []
    start = _ts_ns(trace, steps["t"].to_numpy())
    end = _ts_ns(trace, steps["t_end"].to_numpy())
    return [json.dumps({"name": name or f"step {k}", "cat": "memtui.step", "ph": "X",
                        "pid": pid, "tid": 1, "ts": round(int(a) / 1000, 3),
                        "dur": round(max(int(b) - int(a), 0) / 1000, 3)})
            for k, name, a, b in zip(steps["step"].to_list(), steps["name"].to_list(),
                                     start, end, strict=True)]


def role_tracks(trace: MemoryTrace, device: str) -> list[tuple[str, Level]]:
    """Each role holding bytes on ``device`` and its level (memory by role, summing to
    allocated at every event: :mod:`memtui.analysis.roles`)."""
    from memtui.analysis.roles import levels_by_role
    from memtui.analysis.timeline.at_time import Timeline

    timeline = Timeline.build(trace, device)
    if not timeline.events and trace.blocks.is_empty():
        return []
    return list(levels_by_role(trace, device).series(timeline).items())


def write_trace_events(trace: MemoryTrace, findings: dict[str, list[Finding]],
                       out: IO[str]) -> int:
    """Write the trace-event JSON of ``trace`` to ``out``; the number of counter samples."""
    out.write('{"displayTimeUnit":"ns","otherData":')
    out.write(json.dumps({"generator": "memtui", "source": trace.meta.source,
                          "path": trace.meta.path, "time_unit": trace.meta.time_unit}))
    out.write(',\n"traceEvents":[\n')
    first = True
    samples = 0

    def emit(text: str) -> None:
        nonlocal first
        if not text:
            return
        out.write(text if first else ",\n" + text)
        first = False

    for pid, device in enumerate(trace.meta.device_names, start=1):
        for line in _metadata(pid, device, trace.meta.path):
            emit(line)
        levels = [("allocated", allocated_level(trace, device)),
                  ("reserved", reserved_level(trace, device))]
        levels += [(f"role {role}", level) for role, level in role_tracks(trace, device)]
        for name, level in levels:
            if level is None or level.values.size == 0:
                continue
            for count, chunk in _counter_lines(trace, name, pid, level):
                samples += count
                emit(chunk)
        for finding in findings.get(device, []):
            if finding.evidence.t is not None:
                ns = int(_ts_ns(trace, np.array([finding.evidence.t]))[0])
                emit(_instant(finding, pid, ns))
        for line in _step_slices(trace, device, pid):
            emit(line)
    out.write("\n]}\n")
    return samples


def export_perfetto(trace: MemoryTrace, findings: dict[str, list[Finding]],
                    path: Path, inputs: Iterable[str | Path | None] = ()) -> int:
    """Write the trace-event JSON file at ``path`` (through an exclusive temporary beside
    it, renamed over it: :func:`memtui.outputs.atomic_file`, never over one of
    ``inputs``)."""
    with atomic_file(path, "w", inputs) as out:
        return write_trace_events(trace, findings, out)


__all__ = ["distinct_samples", "export_perfetto", "write_trace_events"]
