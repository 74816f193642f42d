"""A machine short of memory is not called a bomb (issue 27, point 13)."""

from __future__ import annotations

import pickle
import resource

import pytest

from memtui.errors import CaptureError
from memtui.sources.common import safe_pickle


@pytest.fixture
def snapshot_file(tmp_path):
    path = tmp_path / "big.pickle"
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [[{"x": i} for i in
                                                                     range(20000)]]}))
    return path


def out_of_memory(self):
    raise MemoryError


def test_under_an_address_space_limit_it_says_memory_is_short_and_how_much(
        snapshot_file, monkeypatch):
    real = resource.getrlimit
    monkeypatch.setattr(resource, "getrlimit", lambda which: (
        (2 << 30, resource.RLIM_INFINITY) if which == resource.RLIMIT_AS else real(which)))
    monkeypatch.setattr(safe_pickle._RefusingUnpickler, "load", out_of_memory)
    monkeypatch.setattr(safe_pickle, "_address_space_bytes", lambda: 2 << 30)
    with pytest.raises(CaptureError) as caught:
        safe_pickle.load_pickle(snapshot_file)
    message = str(caught.value)
    assert "not enough memory to read it" in message
    assert "GiB to unpickle" in message
    assert "may use only 2.0 GiB in all (ulimit -v)" in message
    assert "bomb" not in message


def test_with_too_little_free_memory_it_says_so(snapshot_file, monkeypatch):
    monkeypatch.setattr(safe_pickle._RefusingUnpickler, "load", out_of_memory)
    monkeypatch.setattr(safe_pickle, "_available_bytes", lambda: 1 << 20)
    with pytest.raises(CaptureError) as caught:
        safe_pickle.load_pickle(snapshot_file)
    assert "only 0.0 GiB of memory is free on this machine" in str(caught.value)


def test_a_bomb_with_memory_to_spare_is_still_a_bomb(snapshot_file, monkeypatch):
    monkeypatch.setattr(safe_pickle._RefusingUnpickler, "load", out_of_memory)
    monkeypatch.setattr(safe_pickle, "memory_short_of", lambda wanted: "")
    monkeypatch.setattr(safe_pickle.memory_bounded, "__enter__",
                        lambda self: setattr(self, "limited", True) or self)
    monkeypatch.setattr(safe_pickle.memory_bounded, "__exit__", lambda self, *exc: None)
    with pytest.raises(CaptureError) as caught:
        safe_pickle.load_pickle(snapshot_file)
    assert "container bomb?): refused" in str(caught.value)
