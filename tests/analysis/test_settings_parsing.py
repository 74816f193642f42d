"""What the user types and what the capture recorded, read as memtui reads them: the
inefficiency thresholds (``early=50%``) and the allocator's recorded ``max_split_size``.
Answers worked out by hand from the formats (findings/flags.py's docstring, PyTorch's
``allocator_settings``)."""

from __future__ import annotations

import pytest

from memtui.analysis.findings.allocator import settings_of
from memtui.analysis.findings.flags import Threshold, parse_thresholds
from tests.helpers.findings_traces import TraceBuilder

MiB = 1 << 20


@pytest.mark.parametrize(("typed", "early"), [
    ("early=50%", Threshold(ns=None, percent=50.0)),
    ("early=25%,1s", Threshold(ns=1_000_000_000, percent=25.0)),
    ("lazy=off", Threshold(ns=None, percent=None)),
])
def test_a_percentage_alone_is_read(typed, early):
    assert parse_thresholds(typed).early_allocation == early


@pytest.mark.parametrize("typed", ["early=", "idle= late=1s", "=50%"])
def test_a_name_without_a_value_is_refused(typed):
    with pytest.raises(ValueError, match="not a threshold"):
        parse_thresholds(typed)


@pytest.mark.parametrize("recorded", [1, 200 * MiB, (1 << 62) - 1])
def test_the_recorded_max_split_size_is_read_without_a_conf_string(recorded):
    b = TraceBuilder(settings={"max_split_size": recorded})
    b.alloc("x", 1)
    assert settings_of(b.build()).max_split_size == recorded


@pytest.mark.parametrize("recorded", [0, -1, 1 << 62, True, "200"])
def test_a_recorded_max_split_size_out_of_range_means_none(recorded):
    """PyTorch records SIZE_MAX-like figures for "no limit"; memtui takes no limit."""
    b = TraceBuilder(settings={"max_split_size": recorded})
    b.alloc("x", 1)
    assert settings_of(b.build()).max_split_size is None
