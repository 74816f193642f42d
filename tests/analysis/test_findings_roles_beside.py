"""find_all computes the bytes by role in a thread of their own while the other finders
run (the savings finder reads them); a failure there is raised by find_all itself, once,
and the thread says nothing."""

from __future__ import annotations

import threading

import pytest

import memtui.analysis.findings as findings
import memtui.analysis.roles as roles
from memtui.analysis.findings import find_all
from memtui.analysis.roles import levels_ready
from tests.helpers.findings_traces import DEVICE, training_loop


def test_roles_are_computed_beside_the_finders(monkeypatch):
    where: list[str] = []
    started = threading.Event()
    role_levels = roles.role_levels

    def recorded(*args, **kwargs):
        where.append(threading.current_thread().name)
        started.set()
        return role_levels(*args, **kwargs)

    def after_the_roles_started(trace, device):  # (so that no scheduling makes it race)
        started.wait(10)
        started.clear()
        return []

    monkeypatch.setattr(roles, "role_levels", recorded)
    monkeypatch.setattr(findings, "FINDERS", (after_the_roles_started, *findings.FINDERS))
    trace = training_loop(6)
    alone = find_all(training_loop(6), what_if=False)
    found = find_all(trace, what_if=False)
    assert where == ["memtui-roles", "memtui-roles"]  # each trace's roles, once, beside
    assert levels_ready(trace, DEVICE) is not None
    assert [f.title for f in found[DEVICE]] == [f.title for f in alone[DEVICE]]


def test_a_failure_of_the_roles_is_raised_by_find_all(monkeypatch):
    hooked: list[object] = []
    monkeypatch.setattr(threading, "excepthook", hooked.append)

    def broken(*args, **kwargs):
        raise RuntimeError("no roles here")

    monkeypatch.setattr(roles, "role_levels", broken)
    with pytest.raises(RuntimeError, match="no roles here"):
        find_all(training_loop(6), what_if=False)
    assert hooked == []
