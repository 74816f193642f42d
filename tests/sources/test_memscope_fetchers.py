"""How many typed reads of an msMemScope DB run at once: one a core and one more, from
three to six (``memtui.sources.memscope.read.typed_fetchers``)."""

from __future__ import annotations

import os

import pytest

from memtui.sources.memscope import read


@pytest.mark.parametrize(("cores", "fetchers"), [(1, 3), (2, 3), (3, 4), (5, 6), (64, 6)])
def test_a_core_each_and_one_more(monkeypatch, cores, fetchers):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    assert read.typed_fetchers() == fetchers


def test_without_affinity_the_cpu_count(monkeypatch):
    def no_affinity(pid):
        raise OSError("not here")

    monkeypatch.setattr(os, "sched_getaffinity", no_affinity, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    assert read.typed_fetchers() == 5
