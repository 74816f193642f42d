"""The Capture facts view's content (analysis.capture_facts), on the toy trace by hand."""

from __future__ import annotations

import dataclasses

from memtui.analysis.findings.capture_facts import capture_facts, flatten, stack_mode
from tests.helpers.toy_traces import toy_trace


def test_facts_of_the_toy_trace():
    trace = toy_trace()
    meta = dataclasses.replace(trace.meta, extra={
        "allocator_settings": {"max_split_size": -1, "roundup": {"1": 0, "2": 4}},
        "device_kind": "cuda"}, warnings=["3 rows skipped"])
    sections = dict(capture_facts(dataclasses.replace(trace, meta=meta)))
    capture = dict(sections["Capture"])
    assert capture["source"] == "test" and capture["time"] == "nanoseconds"
    # frames: the allocator's C++ file and two .py files
    assert capture["call stacks"].startswith("Python and C++ frames")
    device = dict(sections["Device cuda:0"])
    assert device["blocks"].startswith("3 ") and device["segments"] == "recorded"
    assert sections["Allocator settings"] == [("max_split_size", "-1"), ("roundup.1", "0"),
                                              ("roundup.2", "4")]
    assert sections["Other facts"] == [("device_kind", "cuda")]
    assert sections["Warnings"] == [("1", "3 rows skipped")]


def test_stack_mode_and_flatten():
    trace = toy_trace()
    assert stack_mode(dataclasses.replace(trace, frames=trace.frames.head(0))) == "none recorded"
    py_only = trace.frames.filter(trace.frames["filename"].str.ends_with(".py"))
    assert stack_mode(dataclasses.replace(trace, frames=py_only)).startswith("Python frames only")
    assert flatten({"a": {"b": {"c": 1}}, "d": {}}) == [("a.b.c", "1"), ("d", "{}")]
