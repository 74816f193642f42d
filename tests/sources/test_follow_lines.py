"""``--follow`` on python-trace and profiler CSVs: only the new complete lines are parsed
(the private file the reader gets holds the header and those lines alone), and after each
burst the trace equals a fresh open of the file."""

from __future__ import annotations

import pytest

from memtui.sources import open_capture
from memtui.sources.follow import CsvFollower, open_follower
from tests.conftest import shared_files
from tests.helpers.live_captures import assert_same_model
from tests.helpers.memscope_files import SCENARIO_TRACE, TRACE_COLUMNS
from tests.sources.test_ascend_profiler import OPERATOR_15, RECORD_7


def follow_in_bursts(path, text: str, bursts: int):
    """Write ``text``'s header, then its lines in ``bursts`` appends (each burst's last
    line first half-written, then finished); poll after each write."""
    header, *lines = text.splitlines(keepends=True)
    path.write_text(header)
    follower = open_follower(path)
    assert isinstance(follower, CsvFollower)
    assert follower.poll().trace is None
    size = -(-len(lines) // bursts)
    shown = []
    for start in range(0, len(lines), size):
        burst = "".join(lines[start:start + size])
        with open(path, "a") as fh:
            fh.write(burst[:-3])  # the last line half written: it waits
        waiting = follower.poll()
        with open(path, "a") as fh:
            fh.write(burst[-3:])
        update = follower.poll()
        assert update.trace is not None
        # the reader got the header and the lines not parsed yet, never the file again
        parsed = burst[:-3].rfind("\n") + 1  # by the poll while the last line was half
        assert follower._lines.chunk.read_text() == header + burst[parsed:]
        assert_same_model(update.trace, open_capture(path))
        shown.append((waiting, update))
    follower.close()
    return shown


def test_a_profiler_memory_record_by_hand(tmp_path):
    shown = follow_in_bursts(tmp_path / "memory_record.csv", RECORD_7, bursts=3)
    last = shown[-1][1].trace
    assert last.events.height == 8
    # the half-written first burst showed its complete lines only
    assert shown[0][0].trace is not None and shown[0][0].trace.events.height == 2


def test_a_profiler_operator_memory_by_hand(tmp_path):
    shown = follow_in_bursts(tmp_path / "operator_memory.csv", OPERATOR_15, bursts=2)
    assert shown[-1][1].trace.blocks.height == open_capture(
        tmp_path / "operator_memory.csv").blocks.height


def test_a_python_trace_csv(tmp_path):
    text = ",".join(TRACE_COLUMNS) + "\n" + "".join(
        ",".join(str(v) for v in r) + "\n" for r in SCENARIO_TRACE)
    shown = follow_in_bursts(tmp_path / "python_trace_100.csv", text, bursts=3)
    calls = shown[-1][1].trace.calls
    assert calls.height == 7  # eight rows, one ending before it starts skipped


@pytest.mark.parametrize("source", shared_files("profiler", "pt_text_l1_rank0__*.csv"),
                         ids=lambda p: p.name)
def test_real_profiler_csvs(tmp_path, source):
    name = source.name.split("__", 1)[1]
    follow_in_bursts(tmp_path / name, source.read_text(), bursts=4)
