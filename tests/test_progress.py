"""How far a long open is (issue 34): phases with counts and rates, on the UI's bar and on
stderr for the commands (a live line on a terminal, erased before anything is printed;
one line per phase under MEMTUI_PROGRESS=1; nothing otherwise), from every phase of an
msMemScope open, the memory layers and the findings."""

from __future__ import annotations

import io
import os
import subprocess
import sys

from memtui.progress import Phases, StderrProgress, counted
from tests.conftest import REPO


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_counts_are_short():
    assert [counted(v) for v in (0, 950, 12_345, 3_200_000, 1.1e9)] == \
        ["0", "950", "12.3K", "3.2M", "1.1G"]
    assert counted(2_500, "rows") == "2.5K rows"


def test_a_phase_says_its_count_total_and_rate():
    clock, said = Clock(), []
    phases = Phases(lambda fraction, message: said.append((fraction, message)), clock)
    reading = phases.start("reading rows", (0.2, 0.6), total=4_000_000)
    clock.now = 2.0
    reading.update(1_000_000)
    clock.now = 4.0
    reading.finish(4_000_000)
    said = [(round(fraction, 6), message) for fraction, message in said]
    assert said == [(0.2, "reading rows: 4.0M rows"),
                    (0.3, "reading rows: 1.0M of 4.0M rows · 500.0K rows/s"),
                    (0.6, "reading rows: 4.0M rows · 1.0M rows/s")]


def test_on_a_terminal_one_line_rewritten_then_erased():
    clock, stream = Clock(), io.StringIO()
    report = StderrProgress(stream, live=True, clock=clock)
    report(0.1, "reading rows: 1.0M of 4.0M rows")
    clock.now = 0.1
    report(0.2, "reading rows: 2.0M of 4.0M rows")  # too soon: not written
    clock.now = 1.0
    report(0.3, "reading\nrows \x1b[31m")  # a file's text: one line, escaped
    report(1.0, "done")
    assert stream.getvalue() == ("\r\x1b[Kmemtui: reading rows: 1.0M of 4.0M rows [ 10%]"
                                 "\r\x1b[Kmemtui: reading rows \\x1b[31m [ 30%]"
                                 "\r\x1b[K")
    report.close()  # nothing shown: nothing more written
    assert stream.getvalue().endswith("[ 30%]\r\x1b[K")


def test_elsewhere_one_line_per_phase():
    stream = io.StringIO()
    report = StderrProgress(stream, live=False)
    for fraction, message in [(0.0, "reading rows: 9 rows"), (0.3, "reading rows: 9 rows · 9/s"),
                              (0.6, "pairing allocations: 5 rows"),
                              (0.7, "pairing allocations: 5 rows · 5/s"), (1.0, "done"),
                              (0.0, "finding: 5 events"), (1.0, "finding: 5 events · 1/s")]:
        report(fraction, message)
    report.close()
    assert stream.getvalue().splitlines() == [
        "memtui: reading rows: 9 rows · 9/s", "memtui: pairing allocations: 5 rows · 5/s",
        "memtui: finding: 5 events"]


def summary(path, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memtui.cli", "summary", str(path)],
                          cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), **env})


def test_summary_reports_every_phase_of_an_msmemscope_open(tmp_path):
    from benchmarks.generate_memscope import generate_db

    path = generate_db(tmp_path / "memscope_dump_1.db", 3_000)
    quiet = summary(path)
    loud = summary(path, MEMTUI_PROGRESS="1", XDG_CACHE_HOME=str(tmp_path / "other"))
    assert quiet.returncode == loud.returncode == 0
    assert quiet.stderr == ""
    assert loud.stdout == quiet.stdout  # the report never touches the output
    phases = [line.split(":")[1].strip() for line in loud.stderr.splitlines()]
    assert phases == [f"reading rows of {path.name}", "pairing allocations",
                      "interning call stacks", "levels", "markers and calls", "memory layers",
                      "finding"], loud.stderr
    assert all(line.startswith("memtui: ") for line in loud.stderr.splitlines())
    assert "rows/s" in loud.stderr and "events/s" in loud.stderr


def test_progress_off_and_a_bad_file_still_ends_in_its_one_line(tmp_path):
    bad = tmp_path / "memscope_dump_1.db"
    bad.write_bytes(b"SQLite format 3\x00" + b"\x00" * 200)
    done = summary(bad, MEMTUI_PROGRESS="1")
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1].startswith(f"memtui: {bad}: ")
    off = summary(bad, MEMTUI_PROGRESS="0")
    assert off.returncode == 2 and len(off.stderr.splitlines()) == 1
