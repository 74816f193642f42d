"""The Stacks screen's tree escapes frame names (issue 31 probe): a name's tab, DEL,
U+2028 or NEL reached the terminal raw (the row's text jumped, characters vanished)."""

from __future__ import annotations

import memtui
from memtui.tui.app import MemtuiApp
from memtui.tui.widgets.stack_tree import StackTreeView
from tests.helpers.hostile_files import write_hostile_snapshot
from tests.helpers.toy_traces import ready, settle


async def test_the_stack_tree_rows_hold_no_raw_control_character(tmp_path):
    trace = memtui.open(write_hostile_snapshot(tmp_path / "h.pickle"), use_cache=False).trace
    app = MemtuiApp(trace)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press("4")
        await settle(pilot)
        tree = app.screen.query_one(StackTreeView)
        rows = [tree.render_line(y).text for y in range(tree.size.height)]
        named = [row for row in rows if "\\" in row]  # an escaped hostile name shown
        assert named, rows
        raw = {repr(c) for row in rows for c in row if not c.isprintable()}
        assert not raw, raw
    assert app.crash is None
