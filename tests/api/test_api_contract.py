"""Issue 31 item 13: the API raises what its docstrings promise, and holds no file open.

A NUL in a path, an unknown limit or a value that is no size, an ``align`` that is none
of step, time, position, a ``shift`` beyond any capture: :class:`memtui.CaptureError`
(a wrong *type* stays TypeError, with a message saying what is expected);
``for f in capture.findings()`` iterates; an open Capture reopened from the cache, its
frames and levels memory-mapped, holds no file descriptor.
"""

from __future__ import annotations

import gc
import os

import pytest

import memtui
from memtui import cache
from memtui.errors import CaptureError
from tests.conftest import REPO

LEAK = REPO / "tests" / "data" / "cuda_train_leak.pickle"


@pytest.mark.parametrize("call", [
    lambda: memtui.open("run\x00.pickle"),
    lambda: memtui.compare(LEAK, "b\x00.pickle"),
    lambda: memtui.open(LEAK).check("base\x00.pickle"),
    lambda: memtui.open(LEAK).check(limits={"max_peak": "abc"}),
    lambda: memtui.open(LEAK).check(limits={"nope": 1}),
    lambda: memtui.open(LEAK).check(max_peak=float("nan")),
    lambda: memtui.compare(LEAK, LEAK, align="bogus"),
    lambda: memtui.compare(LEAK, LEAK, shift=10**30),
], ids=["nul-open", "nul-compare", "nul-baseline", "limit-size", "limit-name", "limit-nan",
        "align", "shift"])
def test_bad_values_are_capture_errors(call):
    with pytest.raises(CaptureError) as caught:
        call()
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("call, said", [
    (lambda: memtui.open(LEAK).check(limits="max_peak=1"), "a mapping of limit names"),
    (lambda: memtui.compare(LEAK, LEAK, shift="x"), "a whole number"),
    (lambda: memtui.compare(LEAK, LEAK, align=3), "align is one of"),
])
def test_wrong_types_say_what_is_expected(call, said):
    with pytest.raises(TypeError, match=said):
        call()


def test_findings_iterate_and_count():
    found = memtui.open(LEAK).findings()
    listed = list(found)
    assert listed == found.all() and len(found) == len(listed) > 0
    assert [f.kind for f in found][0] == found.all()[0].kind


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="no /proc/self/fd here")
def test_an_open_capture_holds_no_file_descriptor(monkeypatch):
    monkeypatch.setattr(cache, "MAP_FROM_BYTES", 0)  # every frame and level memory-mapped
    monkeypatch.setattr(cache, "READ_NPY_BELOW", 0)
    first = memtui.open(LEAK)
    first.summary()
    cache.wait_for_stores()
    del first
    gc.collect()
    before = _fds()
    captures = [memtui.open(LEAK) for _ in range(4)]
    for capture in captures:
        assert capture.trace.meta.cache_key is not None  # reopened from the cache
        capture.summary()
        capture.findings()
        assert capture.trace.events.height > 0
    assert _fds() == before
    from memtui.analysis.timeline.levels import allocated_level

    level = allocated_level(captures[0].trace, captures[0].devices[0])
    assert level.values.size > 0 and int(level.values.max()) > 0  # mapped and readable
