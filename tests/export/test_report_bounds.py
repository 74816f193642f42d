"""Issue 31 item 11: the report stays a page whatever the capture holds.

2,000 OOM events with deep stacks once made a 12.5 MB page (6 kB per finding), and
msMemScope names of 200,000 characters a 3.4 MB one.  A device's section lists its 50 most
severe findings and says how many more there are, a chart marks at most 50 OOMs, and every
string from a file is cut to a thousand characters, saying how many more it had.
"""

from __future__ import annotations

import pickle
import re

from memtui.cli import main
from memtui.export.svg import MAX_OOM_MARKS, MAX_TEXT, html_text
from tests.helpers.compare_traces import MiB, loop_snapshot
from tests.helpers.memscope_files import mem, row, write_db

OOMS = 300  # (2,000 made a 12.5 MB page: 6 kB a finding)


def many_ooms(path):
    snapshot = loop_snapshot(steps=4)
    trace = snapshot["device_traces"][0]
    t = trace[-1]["time_us"]
    frames = [{"filename": f"/src/layer_{k}.py", "line": k, "name": f"forward_{k}"}
              for k in range(30)]
    for k in range(OOMS):
        trace.append({"action": "oom", "addr": 0, "size": (k + 100) * MiB, "stream": 0,
                      "device_free": MiB, "time_us": t + 10 + k, "frames": frames})
    path.write_bytes(pickle.dumps(snapshot, protocol=4))
    return path


def report(capsys, capture, out) -> str:
    assert main(["report", str(capture), "-o", str(out)]) == 0
    capsys.readouterr()
    return out.read_text(encoding="utf-8")


def test_hundreds_of_ooms_make_a_small_page(tmp_path, capsys):
    page = report(capsys, many_ooms(tmp_path / "ooms.pickle"), tmp_path / "r.html")
    assert len(page.encode()) < 600_000, len(page.encode())
    found = int(re.search(r"<h3>Findings \((\d+)\)</h3>", page).group(1))
    assert found > 50  # the capture does have that many
    assert page.count('<div class="finding') == 50
    assert f"{found - 50:,} more findings of cuda:0 left out here" in page
    assert page.count('class="oom-marker"') <= MAX_OOM_MARKS


def test_long_names_are_cut_and_say_so(tmp_path, capsys):
    name = "op_" + "x" * 200_000
    rows = [row(1, "SYSTEM", "START_TRACE", 1000, dev="N/A"),
            row(2, "OP_LAUNCH", "ATEN_START", 1100, name=name),
            mem(3, "MALLOC", "PTA", 1200, 1, 0x1000, 4096, total=1 << 20, used=4096,
                owner=f"PTA@{name}", py=f'"/a.py(1): {name}\n"'),
            row(4, "SYSTEM", "STOP_TRACE", 2000, dev="N/A")]
    db = write_db(tmp_path / "memscope_dump_1.db", rows)
    page = report(capsys, db, tmp_path / "r.html")
    assert len(page.encode()) < 200_000, len(page.encode())
    assert "more characters)" in page and "x" * (MAX_TEXT + 1) not in page


def test_html_text_cuts_escapes_and_counts():
    text = html_text("<" * (MAX_TEXT + 5))
    assert text.startswith("&lt;" * 10) and text.endswith("... (5 more characters)")
    assert html_text(None) == "" and html_text("::x") == "\\x3a:x"
