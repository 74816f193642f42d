"""A newcomer's path (issue 35, "Screens and words", items 1 to 9), with Pilot at 80x24 and
120x40 (60x20 where it fits): the keys and words of every screen.

1. Help and Quit stay in the key bar on every screen at every width.
2. One status bar: the same fields and words on every screen and at every size, the
   findings count, ``at leak`` kept while the cursor stays on its event, ``event #K/N``
   always, its abbreviations in ``?``.
3. A sparkline is scaled to its own range (the leak of ``cuda_train_leak.pickle``).
4. Opening at a leak puts the window and the view on its steps.
5. The Tables scroll to the selected block's row after a filter.
6. The Pool's OOM banner: human units, its cause once, why free device memory did not help.
7. The help lists each key once; ``s`` sorts by the column under the column cursor.
8. A capture's warnings never pop up over the figures: the status bar counts them.
9. A finding's details: one fact a line.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from memtui.analysis.findings import find_all, flat
from memtui.loading import load_trace
from memtui.sources import open_capture
from memtui.tui.answer import top_finding
from memtui.tui.app import MemtuiApp
from memtui.tui.screens.findings import detail_text, figure_label, sparkline
from memtui.tui.screens.modals import FactsScreen
from tests.helpers.findings_traces import training_loop
from tests.helpers.map_pilot import screen_text
from tests.helpers.toy_traces import answered, ready, settle, status_lines, status_text, toy_trace

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "snapshots" / "demo_training.pickle"
TRAIN_LEAK = REPO / "tests" / "data" / "cuda_train_leak.pickle"
OOM_FRAGMENTED = REPO / "tests" / "data" / "cuda_oom_fragmented.pickle"
SIZES = [(80, 24), (120, 40)]
SCREENS = "123456"
SEPARATOR = " │ "  # between the status bar's fields


async def show(pilot, key: str) -> None:
    await pilot.press(key)
    await settle(pilot)


# -- 1. Help and Quit in the key bar ---------------------------------------------------------

@pytest.mark.parametrize("size", [(60, 20), *SIZES], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_help_and_quit_show_in_the_key_bar_on_every_screen(size):
    app = MemtuiApp(training_loop(6), findings_first=False)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        for key in SCREENS:
            await show(pilot, key)
            bar = app.screen.query_one(Footer)
            keys = {footer_key.action: footer_key for footer_key in bar.query(FooterKey)}
            for action in ("help", "quit"):
                region = keys[action].region
                assert region.width > 0 and region.right <= size[0], (key, action)
            last = screen_text(app).splitlines()[-1]
            assert "? Help" in last and "q Quit" in last, (key, last)


# -- 2. One status bar ----------------------------------------------------------------------

async def test_one_status_bar_the_same_on_every_screen_and_size():
    """The bar as read (its lines joined) is one text on every screen at 60, 80 and 120
    columns: the same fields in the same words; wrapped where narrow, never cut."""
    trace = training_loop(8)
    seen: dict[tuple, str] = {}
    for size in [(60, 20), *SIZES]:
        app = MemtuiApp(trace, findings_first=False, open_at_answer=True)
        async with app.run_test(size=size) as pilot:
            await answered(pilot)
            for key in SCREENS:
                await show(pilot, key)
                seen[(size, key)] = status_text(app)
                assert all(len(line) <= size[0] for line in status_lines(app))
    texts = set(seen.values())
    assert len(texts) == 1, seen
    text = texts.pop()
    fields = [field.strip() for field in text.split(SEPARATOR.strip())]
    assert fields[0] == "cuda:0" and " event #" in fields[1]
    assert [f.split()[0] for f in fields[2:4]] == ["alloc", "resv"]
    assert "at leak" in fields and " found" in fields[-1]


async def test_the_note_stays_while_the_cursor_stays_on_its_event():
    """``at leak`` after ``z``, ``Z``, ``[`` ``]`` and ``x`` (the cursor did not move); gone
    after ``l``.  ``event #K/N`` always, also at 80 columns."""
    app = MemtuiApp(training_loop(8), findings_first=False, open_at_answer=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await answered(pilot)
        event = app.cursor.event
        for key in ("z", "Z", "left_square_bracket", "right_square_bracket", "x", "z"):
            await show(pilot, key)
            assert app.cursor.event == event
            assert "at leak" in status_text(app), key
            assert f"event #{event}/" in status_text(app)
        await show(pilot, "l")
        assert "at leak" not in status_text(app)
        assert f"event #{event + 1}/" in status_text(app)


async def test_the_help_explains_the_status_bar_s_words():
    app = MemtuiApp(toy_trace())
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        sections = dict((title, rows) for title, rows in app.help_sections())
        words = [row[0] for row in sections["Status bar"]]
        for word in ("event #K/N", "alloc", "resv", "win", "at peak / leak / oom"):
            assert word in words
        shown = status_text(app)
        assert "alloc " in shown and "resv " in shown and "event #" in shown


# -- 3. A sparkline on its own range ----------------------------------------------------------

def test_a_short_sparkline_spans_its_own_range():
    """Eight values in a 60-cell line: eight bars from the lowest to the highest (the old
    sparkline sliced by the line's width, not the values': eight flat bars)."""
    assert sparkline([0, 4, 7, 10, 13, 16, 19, 22], 60) == "▁▂▃▄▅▆▇█"
    assert sparkline([3, 1], 60) == "█▁"
    assert sparkline([5, 5, 5], 10) == "▁▁▁"
    assert sparkline([], 10) == ""


def test_the_real_leak_s_sparkline_rises():
    leak = next(f for f in flat(find_all(open_capture(TRAIN_LEAK))) if f.kind == "leak")
    levels = leak.detail["level_at_steps"]
    assert levels[0] < levels[-1]
    lines = detail_text(leak, None).plain.splitlines()
    line = lines[lines.index(next(x for x in lines if x.startswith("live bytes"))) + 1].strip()
    assert len(line) == len(levels) and line[0] == "▁" and line[-1] == "█"
    assert sorted(line) == list(line)  # rising steps: rising bars


# -- 4. Opening at a leak: its steps in view ----------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_opening_at_a_leak_shows_its_steps(size):
    """cuda_train_leak leaks in its last 0.12 s of 7.5 s: the window and the view open on
    those steps (the Blocks map shows them, not the whole run), and ``z`` zooms in more."""
    leak = top_finding(find_all(open_capture(TRAIN_LEAK)), "cuda:0")
    app = MemtuiApp(TRAIN_LEAK, findings_first=False)
    async with app.run_test(size=size) as pilot:
        await answered(pilot)
        cursor = app.cursor
        timeline = app.timeline(cursor.device)
        assert cursor.window == leak.evidence.window == cursor.view
        assert cursor.view[1] - cursor.view[0] < (timeline.end - timeline.start) / 10
        await show(pilot, "2")
        assert "+0.000 s .." not in screen_text(app).splitlines()[0]
        before = app.cursor.view
        await show(pilot, "z")
        assert app.cursor.view[1] - app.cursor.view[0] < before[1] - before[0]
        assert "at leak" in status_text(app)


# -- 5. The Tables scroll to the selected block -----------------------------------------------

@pytest.fixture(scope="module")
def demo():
    return load_trace(DEMO)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_a_filtered_block_view_shows_the_selected_block(demo, size):
    """The leak's 187 blocks, the cursor on the 150th: its row is highlighted and on
    screen (it stayed on the first page before)."""
    leak = next(f for f in flat(find_all(demo)) if f.kind == "leak")
    ids = list(leak.evidence.block_ids)
    app = MemtuiApp(demo, findings_first=False)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        app.move_cursor(block_id=ids[150])
        app.filter_blocks(ids, "leak")
        await settle(pilot)
        await settle(pilot)
        table = app.screen.table
        row = table.model.record(table.cursor_row)
        assert row["block_id"] == ids[150]
        assert table.first_row <= table.cursor_row < table.first_row + table.page_rows


# -- 6. The OOM banner ------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_oom_banner_says_its_cause_once_in_human_units(size):
    """The H100's fragmented OOM: 100 MiB asked, 14 MiB the largest gap, 76.7 GiB free on
    the device that a per-process memory fraction kept from the allocator."""
    app = MemtuiApp(OOM_FRAGMENTED, findings_first=False)
    async with app.run_test(size=size) as pilot:
        await answered(pilot)
        assert "at oom" in status_text(app)
        await show(pilot, "3")
        banner = str(app.screen.query_one("#oom").render())
        words = " ".join(banner.split())
        assert words.startswith("OUT OF MEMORY asking 100.0 MiB: fragmentation:")
        assert words.count("fragmentation") == 1 and words.count("100.0 MiB") == 2
        assert "76.7 GiB free" in words and "per-process limit" in words
        assert "104857600" not in words and "82367938560" not in words


# -- 7. The help, once per key; s and the column cursor ----------------------------------------

async def test_the_help_lists_each_key_once_on_every_screen(demo):
    app = MemtuiApp(demo, findings_first=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        for key in SCREENS:
            await show(pilot, key)
            keys = Counter(k for title, rows in app.help_sections()
                           if title in ("Everywhere", "Palette") or title.endswith(" screen")
                           for row in rows for k in row[0].split(", "))
            assert [k for k, n in keys.items() if n > 1] == [], key


async def test_s_sorts_by_the_column_under_the_column_cursor(demo):
    app = MemtuiApp(demo, findings_first=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await show(pilot, "5")
        table = app.screen.table
        column = table.current_column
        assert column.title == "Size"  # where it starts: the column most often sorted
        header = table.render_line(0)
        cursor = [s.text for s in header if s.style and s.style.reverse]
        assert cursor and cursor[0].strip().startswith("Size")
        await show(pilot, "s")
        assert table.model.sort_key == column.key and table.model.descending
        await show(pilot, "right")
        assert table.current_column.key != column.key
        await show(pilot, "s")
        assert table.model.sort_key == table.current_column.key


# -- 8. Warnings in the status bar --------------------------------------------------------------

@pytest.mark.parametrize("size", [(60, 20), *SIZES], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_warnings_are_counted_not_popped_up(size):
    trace = toy_trace()
    trace.meta.warnings.extend(["skipped 3 rows of x.csv: negative sizes", "no clock"])
    app = MemtuiApp(trace)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        assert len(app._notifications) == 0  # nothing over the figures
        assert "⚠ 2 warnings (A)" in status_text(app)
        await show(pilot, "A")
        assert isinstance(app.screen, FactsScreen)
        listed = [value for _, rows in app.screen.sections for _, value in rows]
        assert "skipped 3 rows of x.csv: negative sizes" in listed


# -- 9. A finding's details, one fact a line ----------------------------------------------------

@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_finding_details_are_one_fact_a_line(demo, size):
    leak = next(f for f in flat(find_all(demo)) if f.kind == "leak")
    lines = detail_text(leak, "+1 s").plain.splitlines()
    for key in ("bytes_per_step", "steps", "blocks", "confidence", "first_step_name"):
        label = figure_label(key)
        line = next(x for x in lines if x.strip().startswith(label + " "))
        assert "," not in line, line
    app = MemtuiApp(demo, findings_first=True)
    async with app.run_test(size=size) as pilot:
        await answered(pilot)
        assert app.current_mode == "findings"
        shown = screen_text(app)
        assert "per step" in shown and ", per step" not in shown
        box = app.screen.query_one("#findings-detail-box")
        await show(pilot, "J")
        assert box.scroll_y > 0 or box.max_scroll_y == 0
