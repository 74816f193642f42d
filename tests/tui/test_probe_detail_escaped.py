"""The Findings screen's detail pane escapes every string from the capture (issue 31 probe).

A snapshot whose frame names carry newlines, bidi overrides, DEL and U+2028: the detail
pane printed the evidence stack's frame names and file names, the figures (the leak's
``function``), the device and the owner raw (a name split over two rows, a bidi override
reordering the pane).  Every character of the pane is printable but its line breaks.
"""

from __future__ import annotations

import memtui
from memtui.tui.screens.findings import detail_text
from tests.helpers.hostile_files import write_hostile_snapshot


def test_the_detail_pane_holds_no_raw_control_or_bidi_character(tmp_path):
    capture = memtui.open(write_hostile_snapshot(tmp_path / "hostile.pickle"),
                          use_cache=False)
    kinds = set()
    for finding in capture.findings():
        kinds.add(finding.kind)
        plain = detail_text(finding, "at +0.001 s").plain
        raw = sorted({repr(c) for c in plain if c != "\n" and not c.isprintable()})
        assert raw == [], (finding.kind, raw)
    assert {"leak", "oom", "peak"} <= kinds  # the stacks and figures were looked at
