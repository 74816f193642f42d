"""The Tables screen's rows escape what a capture wrote (issue 31 probe).

A frame named ``"fwd\\r::add-mask::secret"`` in the Stack top column sent a CR to the
terminal: the row's ID and Size were overwritten by the name; a bidi override reordered the
row.  Each cell is escaped as the rest of memtui escapes names (``\\r``, ``\\u202e``).
"""

from __future__ import annotations

from memtui.analysis.tables import Column
from memtui.tui.widgets.table import VirtualTable


class _Model:
    columns = [Column("block_id", "ID", "int", 6), Column("top", "Stack top", "top", 24)]


def test_a_row_holds_no_raw_control_or_bidi_character():
    table = VirtualTable()
    table.model = _Model()
    table._widths = [6, 24]
    line = table._line_text(["17", "fwd\r::x\u202e\u2066y\x1b[2J\n"])
    assert all(c.isprintable() for c in line), repr(line)
    assert line.startswith("    17 fwd\\r::x\\u202e") and len(line) == 6 + 1 + 24 + 1
