"""Issue 31 item 14: each message says what is true of the input it names.

* a folder of one or two ``rankN.pickle`` files that are no captures names each file and
  its problem, never "nothing in it is a format memtui reads";
* a profiler CSV with a NUL: in its first line, a binary file (no format); in a row,
  read (it said "holds no CSV header");
* ``--connect-timeout -1`` (0, nan, inf): the option is wrong, not "no Dask scheduler
  answered";
* ``memtui cache clear`` says which folder it cleared.

(``memtui record`` without torch: tests/cli/test_record.py.)
"""

from __future__ import annotations

import pytest

from memtui.cli import main
from memtui.sources import open_capture
from tests.helpers.profiler_folders import RECORD_HEADER
from tests.helpers.rank_folders import write_ranks


def one_line(capsys, argv) -> str:
    assert main([str(a) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and "Traceback" not in "\n".join(err), err
    return err[-1]


@pytest.mark.parametrize("count", [1, 2])
def test_a_folder_of_broken_rank_files_names_them(tmp_path, capsys, count):
    for rank in range(count):
        (tmp_path / "run").mkdir(exist_ok=True)
        (tmp_path / "run" / f"rank{rank}.pickle").write_bytes(b"\x80\x04not a pickle")
    line = one_line(capsys, ["summary", tmp_path / "run"])
    assert "nothing in it is a format" not in line
    assert "rank0.pickle" in line or "rank1.pickle" in line, line


def test_a_folder_of_good_rank_files_opens(tmp_path, capsys):
    write_ranks(tmp_path / "run", 1)
    assert main(["summary", str(tmp_path / "run")]) == 0
    assert "rank0.pickle" in capsys.readouterr().out


def test_a_profiler_csv_with_a_nul(tmp_path, capsys):
    header_nul = tmp_path / "memory_record.csv"
    header_nul.write_bytes(b"Compo\x00nent,Timestamp(us)\nPTA,1\n")
    line = one_line(capsys, ["summary", header_nul])  # binary: no source claims it
    assert "not a format memtui reads" in line and "no CSV header" not in line
    row_nul = tmp_path / "r" / "memory_record.csv"
    row_nul.parent.mkdir()
    row_nul.write_bytes((RECORD_HEADER + "\nPTA+GE,1000.0,1.0,2.0,1.0,7,NPU:0\n"
                         "PTA+GE,1001.0,3.0,4.0,3.0,7,NPU:0\x00\n").encode())
    trace = open_capture(row_nul)
    assert trace.events.height >= 1  # the rows before it, at least, are read


@pytest.mark.parametrize("value", ["-1", "0", "nan", "inf"])
def test_a_connect_timeout_that_is_no_wait_is_the_options_fault(tmp_path, capsys, value):
    write_ranks(tmp_path / "run", 2)
    line = one_line(capsys, ["summary", tmp_path / "run", "--cluster", "127.0.0.1:1",
                             "--connect-timeout", value])
    assert line.startswith("memtui: --connect-timeout:") and "no Dask" not in line


def test_cache_clear_names_its_folder(capsys, isolated_cache):
    write = isolated_cache
    assert main(["cache", "clear"]) == 0
    assert str(write) in capsys.readouterr().out
