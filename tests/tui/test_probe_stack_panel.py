"""The Tables screen's call-stack panel escapes frame names (issue 31 probe): a name
holding U+2028, NEL or a newline broke the panel's lines, a bidi override reordered them."""

from __future__ import annotations

from rich.text import Text

import memtui
from memtui.tui.screens.tables import _append_stack
from tests.helpers.hostile_files import write_hostile_snapshot


def test_the_stack_panel_holds_no_raw_control_or_bidi_character(tmp_path):
    capture = memtui.open(write_hostile_snapshot(tmp_path / "hostile.pickle"),
                          use_cache=False)
    trace = capture.trace
    stacks = trace.blocks["stack_id"].drop_nulls().unique().to_list()
    assert stacks
    for stack_id in stacks:
        text = Text()
        _append_stack(text, trace, stack_id, "named\u2028\x85\u202e")
        raw = {repr(c) for c in text.plain if c != "\n" and not c.isprintable()}
        assert not raw, (stack_id, raw)
