"""A capture whose every name came from a hostile file: markup, escape sequences, newlines.

``hostile_trace()`` is the toy trace of toy_traces.py with its devices, frames, markers and
owners renamed so that any of them reaching Rich markup or the terminal raw shows: ``[/]``
raises a MarkupError, ``[@click=app.quit]`` would be a live link, ``\\x1b[`` an escape.
"""

from __future__ import annotations

import polars as pl

from memtui.model import DeviceInfo, MemoryTrace
from tests.helpers.toy_traces import toy_trace

DEVICE0 = "[@click=app.quit]cuda:0[/]"
DEVICE1 = "[/]\x1b[31mnpu\n1"
NAMES = {"cuda:0": DEVICE0, "cuda:1": DEVICE1}


def hostile_trace() -> MemoryTrace:
    trace = toy_trace()
    renamed = pl.col("device").replace(NAMES)
    trace.events = trace.events.with_columns(renamed, owner=pl.lit("[b]owner[/]\x1b[2J"))
    trace.blocks = trace.blocks.with_columns(renamed, owner=pl.lit("[/]weights"),
                                             pool=pl.lit("[red]CUDA"))
    trace.segments = trace.segments.with_columns(renamed, kind=pl.lit("[/]"),
                                                 pool_id=pl.lit("[@click=app.quit]"))
    trace.markers = trace.markers.with_columns(renamed, name=pl.lit("[@click=app.quit]step[/]"))
    trace.frames = trace.frames.with_columns(
        name=pl.lit("[/]forward\x1b]0;pwned\x07"), filename=pl.lit("/work/[b]model.py"))
    trace.meta.devices = [DeviceInfo(NAMES[d.name], kind=d.kind, has_segments=d.has_segments,
                                     start_reserved=d.start_reserved)
                          for d in trace.meta.devices]
    trace.meta.path = "/toy/[/]hostile\x1b[31m.pickle"
    trace.meta.warnings = ["[/]a warning naming \x1b[31m[@click=app.quit]"]
    return trace
