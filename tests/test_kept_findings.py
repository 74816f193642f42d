"""Findings kept beside the reopen cache's entry (issue 23 point 6): a reopen hands back
what ``find_all`` found, equal in every field, under the same settings only, never from
an entry of other code, and never a file that does not read back."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from memtui import cache
from memtui.analysis.findings import find_all
from memtui.analysis.findings import model as findings_model
from memtui.analysis.findings.flags import Threshold, Thresholds
from memtui.loading import findings_of, keep_findings, kept_findings, load_trace
from tests.conftest import shared_files

DEMO = Path(__file__).resolve().parents[1] / "snapshots" / "demo_training.pickle"


def _entry_files(name: str) -> list[Path]:
    return sorted((cache.cache_dir()).glob(f"*/derived-{name}*.json"))


@pytest.mark.parametrize("path", [DEMO, *shared_files("torch_snapshots", "t26_*fullstep*")],
                         ids=lambda p: p.name)
def test_a_reopen_hands_back_the_findings_found(path):
    trace = load_trace(path)
    found = find_all(trace)
    assert kept_findings(trace) is None  # nothing kept yet
    keep_findings(trace, found)
    again = kept_findings(load_trace(path))
    assert again == found  # every field: evidence, window, stack id, block ids, detail


def test_findings_of_finds_once_then_reads(monkeypatch):
    trace = load_trace(DEMO)
    calls = []
    real = find_all

    def counting(t):
        calls.append(1)
        return real(t)

    monkeypatch.setattr("memtui.analysis.findings.find_all", counting)
    first = findings_of(trace)
    second = findings_of(load_trace(DEMO))
    assert len(calls) == 1 and first == second


def test_other_settings_or_other_code_find_again(monkeypatch):
    trace = load_trace(DEMO)
    keep_findings(trace, find_all(trace))
    stricter = Thresholds(early_allocation=Threshold(ns=1))
    other = dataclasses.replace(trace, meta=dataclasses.replace(
        trace.meta, extra={**trace.meta.extra, "thresholds": stricter}))
    assert kept_findings(other) is None
    monkeypatch.setattr(cache, "_code_stamp", "other code")
    assert kept_findings(load_trace(DEMO)) is None  # (the key is taken at open)


def test_the_cache_off_keeps_nothing(monkeypatch):
    trace = load_trace(DEMO)
    monkeypatch.setenv(cache.NO_CACHE_ENV, "1")
    keep_findings(trace, find_all(trace))
    monkeypatch.delenv(cache.NO_CACHE_ENV)
    assert kept_findings(trace) is None


@pytest.mark.parametrize("damage", ["not json", "a finding without its kind",
                                    "an unknown severity", "devices differ"])
def test_a_kept_file_that_does_not_read_back_is_not_trusted(damage):
    trace = load_trace(DEMO)
    keep_findings(trace, find_all(trace))
    (file,) = _entry_files("findings")
    kept = json.loads(file.read_text())
    data = kept["value"]
    if damage == "not json":
        file.write_text("{not json")
    else:  # damaged, yet vouched for by the cache's digest: our own check must refuse it
        first = next(iter(data["findings"].values()))[0]
        if damage == "a finding without its kind":
            del first["kind"]
        elif damage == "an unknown severity":
            first["severity"] = "catastrophic"
        else:
            data["devices"] = ["cuda:9"]
        kept["digest"] = cache._json_digest(data)
        file.write_text(json.dumps(kept))
    assert kept_findings(trace) is None


def test_a_finding_survives_its_dict_form():
    trace = load_trace(DEMO)
    for found in find_all(trace).values():
        for finding in found:
            assert findings_model.finding_from_dict(
                json.loads(json.dumps(findings_model.finding_to_dict(finding)))) == finding


def test_the_findings_command_finds_once(monkeypatch, capsys):
    """``memtui findings`` on a reopen prints the kept findings: no finder runs again."""
    import memtui.analysis.findings as findings_package
    from memtui.cli import main

    calls = []
    real = findings_package.find_all

    def counting(trace):
        calls.append(1)
        return real(trace)

    monkeypatch.setattr(findings_package, "find_all", counting)
    assert main(["findings", str(DEMO), "--json"]) == 0
    first = capsys.readouterr().out
    cache.wait_for_stores()
    assert main(["findings", str(DEMO), "--json"]) == 0
    assert capsys.readouterr().out == first and len(calls) == 1
