"""The rough edges a new user hit (issue 17), each pinned at 80x24 and 120x40 with Pilot.

The grids of screens and sizes run pairwise in the short profile (CI): each screen at one
size, every size met; ``MEMTUI_TEST_PROFILE=long`` runs every combination."""

from __future__ import annotations

from pathlib import Path

import pytest

from memtui.sources import open_capture
from tests.helpers.map_pilot import coloured_cells, maps_app, open_screen, screen_text
from tests.helpers.run_profile import pairwise, sizes

DEMO = Path(__file__).resolve().parents[2] / "snapshots" / "demo_training.pickle"
SIZES = [(80, 24), (120, 40)]


@pytest.fixture(scope="module")
def demo():
    return open_capture(DEMO)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "size"), [
    pytest.param(name, size, id=f"{name}-{size[0]}x{size[1]}")
    for name, size in pairwise(["blocks", "pool", "stacks"], SIZES)])
async def test_search_box_shows_what_is_typed(demo, size, name):
    app = maps_app(demo)
    async with app.run_test(size=size) as pilot:
        await open_screen(pilot, name)
        await pilot.press("slash")
        await pilot.press(*"0x7f")
        await pilot.pause()
        box = app.screen.query_one("#search")
        assert box.has_focus
        assert box.content_region.height == 1
        assert "0x7f" in screen_text(app)


def help_text(app) -> str:
    """The help screen's whole table as plain text (wide: no wrapping)."""
    import io

    from rich.console import Console

    console = Console(width=400, record=True, file=io.StringIO())
    for static in app.screen.query("Static"):
        console.print(getattr(static, "content", None) or static._content)
    return console.export_text()


def alive_rows(trace, device: str, t: int) -> int:
    blocks = trace.device_blocks(device)
    t_free = blocks["t_free"].fill_null(2**62)
    return int(((blocks["t_alloc"] <= t) & (t_free > t)).sum())


@pytest.mark.slow
@pytest.mark.parametrize("size", sizes(SIZES, short=(120, 40)), ids=lambda s: f"{s[0]}x{s[1]}")
async def test_tables_alive_at_the_cursor_follows_the_cursor(demo, size):
    app = maps_app(demo)
    async with app.run_test(size=size) as pilot:
        await open_screen(pilot, "tables", at_end=False)
        app.action_peak()
        await pilot.press("w")  # no window: "all" goes to "alive at the cursor"
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        device, peak_t = app.cursor.device, app.cursor.t
        assert screen.model("blocks").rows.size == alive_rows(demo, device, peak_t)
        # the toast names the keys: [ and ] are not eaten as markup
        toasts = [n for n in app._notifications if "[ and ]" in n.message]
        assert toasts and not toasts[0].markup
        await pilot.press("1")
        app.move_cursor(t=app.timeline(device).start + 1)
        await pilot.press("5")
        await app.workers.wait_for_complete()
        await pilot.pause()
        t = app.cursor.t
        assert t != peak_t
        model = screen.model("blocks")
        assert model.rows.size == alive_rows(demo, device, t)
        codes = model.state_codes(model.rows, t)
        assert not (codes == 0).any()  # no "not yet" row among those alive
        header = str(screen.query_one("#tables-header").render())
        assert f"{model.rows.size:,} of" in header and "alive at" in header


@pytest.mark.slow
@pytest.mark.parametrize("size", sizes(SIZES, short=(80, 24)), ids=lambda s: f"{s[0]}x{s[1]}")
async def test_pool_arrows_move_the_segment_as_help_says(demo, size):
    app = maps_app(demo)
    async with app.run_test(size=size) as pilot:
        await open_screen(pilot, "pool")
        screen = app.screen
        segments = [int(s) for s in screen.state.seg_id]
        assert len(segments) > 2
        await pilot.press(*["pageup"] * (len(segments) // 10 + 1))
        await pilot.pause()
        at = 0
        assert app.cursor.segment_id == segments[at]
        await pilot.press("down")
        await pilot.pause()
        assert app.cursor.segment_id == segments[at + 1]
        await pilot.press("j")
        await pilot.pause()
        assert app.cursor.segment_id == segments[at + 2]
        await pilot.press("up")
        await pilot.pause()
        assert app.cursor.segment_id == segments[at + 1]
        await pilot.press("question_mark")
        await pilot.pause()
        rows = dict(row[:2] for title, section in app.screen.sections for row in section
                    if not title.startswith(("Legend", "Status bar", "Memory by role")))
        assert rows["↑, k"] == "Segment up" and rows["↓, j"] == "Segment down"
        assert not any("(" in what for what in rows.values())  # no raw action names


async def test_help_says_clicks_work_on_every_map(demo):
    app = maps_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_screen(pilot, "blocks")
        await pilot.press("question_mark")
        await pilot.pause()
        text = help_text(app)
        assert "Blocks: select the band" in text and "Pool: select the block" in text


async def test_palette_screenshot_goes_to_the_pictures_folder_and_says_where(
        demo, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_PICTURES_DIR", str(tmp_path))
    app = maps_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        titles = [command.title for command in app.get_system_commands(app.screen)]
        assert sum(title.startswith("Keys") for title in titles) == 1
        assert titles.count("Screenshot") == 1
        saved = app.deliver_screenshot()
        assert saved is not None and Path(saved).parent == tmp_path
        assert Path(saved).read_text().startswith("<svg")
        await pilot.pause()
        assert any(saved in n.message for n in app._notifications)


async def test_screenshot_falls_back_to_the_current_folder(demo, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_PICTURES_DIR", str(tmp_path / "absent"))
    monkeypatch.chdir(tmp_path)
    app = maps_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        saved = app.deliver_screenshot()
        assert Path(saved).parent == tmp_path


@pytest.mark.slow
@pytest.mark.parametrize(("name", "width"), [
    pytest.param(name, width, id=f"{name}-{width}")
    for name, width in pairwise(["trend", "blocks", "tables"], [60, 80])])
async def test_footer_keys_never_run_into_the_palette_label(demo, width, name):
    app = maps_app(demo)
    async with app.run_test(size=(width, 24)) as pilot:
        await open_screen(pilot, name)
        last = screen_text(app).splitlines()[-1]
        assert last.rstrip().endswith("▏^p palette")


def test_block_axis_labels_are_evenly_spaced_and_never_repeat():
    from memtui.tui.widgets.block_map import axis_labels

    # 22 rows: a label every 5 rows from the bottom, each the bytes at its row's bottom edge
    assert axis_labels(2200, 22) == {21: "0", 16: "500", 11: "1000", 6: "1.5K", 1: "2.0K"}
    # so small a range that two rows round alike: the upper one is left out
    labels = axis_labels(3, 12)
    assert list(labels.values()) == sorted(set(labels.values()), key=list(labels.values()).index)
    rows = sorted(axis_labels(5.4 * 2**30, 9))
    assert all(b - a >= 3 for a, b in zip(rows, rows[1:], strict=False))


@pytest.mark.slow
@pytest.mark.parametrize("size", sizes(SIZES, short=(80, 24)), ids=lambda s: f"{s[0]}x{s[1]}")
async def test_blocks_gutter_prints_each_byte_label_once(demo, size):
    app = maps_app(demo)
    async with app.run_test(size=size) as pilot:
        await open_screen(pilot, "blocks")
        lines = screen_text(app).splitlines()[1:-3]
        labels = [line[:6].strip() for line in lines if line[:6].strip()]
        assert labels and labels[0] == "run"  # the slider: the whole run
        byte_labels = [label for label in labels[1:] if label[-1].isdigit() or label[-1] in "KMGT"]
        assert len(byte_labels) == len(set(byte_labels)), labels


def test_meaning_colours_stay_apart_from_the_block_colours():
    import colorsys

    from memtui.tui.widgets import paint

    def hue(colour: str) -> float:
        r, g, b = (int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))
        return colorsys.rgb_to_hsv(r, g, b)[0] * 360

    meaning = {paint.PENDING, paint.SUMMARIZED, paint.SELECTED, paint.CURSOR, paint.LARGEST_GAP}
    assert not meaning & (set(paint.PALETTE) | set(paint.WARM))
    assert all(20 <= hue(c) <= 60 for c in paint.WARM)  # never freed: oranges and yellows
    assert all(abs(hue(c) - hue(paint.PENDING)) > 15 for c in paint.WARM)


@pytest.mark.parametrize("name,words", [
    ("blocks", ["never freed", "ghost", "summed", "selected", "out-of-memory"]),
    ("pool", ["pending free", "existed before the trace", "never freed", "largest usable"]),
    ("trend", ["OOM on the time axis", "the peak of allocated", "the cursor"]),
])
async def test_help_has_a_legend_for_every_mark(name, words):
    app = maps_app(open_capture(DEMO.parent / "demo_oom.pickle"))
    async with app.run_test(size=(120, 40)) as pilot:
        await open_screen(pilot, name)
        legend = dict(app.help_sections())
        rows = next(rows for title, rows in legend.items() if title.startswith("Legend"))
        meanings = " ".join(row[1] for row in rows)
        for word in words:
            assert word in meanings
        if name == "pool":
            assert ("*", next(w for k, w in rows if k == "*")) in rows


@pytest.mark.parametrize("name", ["blocks", "pool"])
async def test_maps_draw_shapes_without_colour(demo, monkeypatch, name):
    from memtui.tui.widgets import paint

    monkeypatch.setenv("NO_COLOR", "1")
    app = maps_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, name)
        text = screen_text(app)
        assert "▀" not in text and "▌" not in text  # two colours a cell mean nothing here
        assert paint.GLYPH_BLOCK in text
        if name == "pool":
            assert paint.GLYPH_FREE in text or paint.GLYPH_PENDING in text


@pytest.mark.parametrize("name", ["trend", "blocks", "pool", "stacks", "tables"])
async def test_every_screen_draws_with_no_color(demo, monkeypatch, name):
    """Under NO_COLOR no screen sends a colour (only greys), and what colour told apart
    is told apart by shape: the trend's curves by their legend's glyphs."""
    monkeypatch.setenv("NO_COLOR", "1")
    app = maps_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, name)
        assert app.return_code is None  # no crash in the no-colour filter
        assert "^p palette" in screen_text(app)
        assert coloured_cells(app) == set()
        if name == "trend":
            lines = screen_text(app).splitlines()
            assert "█ alloc" in lines[0] and "⠶ resv" in lines[0]
            plot = "\n".join(lines[2:12])
            assert "█" in plot and any("\u2800" < ch <= "\u28ff" for ch in plot)


async def test_screens_are_coloured_without_no_color(demo, monkeypatch):
    """The control: without NO_COLOR the same screens do send colours."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    app = maps_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        for name in ("trend", "stacks"):
            await open_screen(pilot, name)
            assert coloured_cells(app), name


async def test_stack_top_rule_is_said_and_can_be_changed(demo):
    app = maps_app(demo)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_screen(pilot, "trend", at_end=False)
        app.action_peak()
        await app.workers.wait_for_complete()
        await pilot.pause()
        title = str(app.screen.query_one("#live-title").render())
        assert "by innermost user frame" in title
        before = app.stack_tops()
        assert app.stack_top_names() == dict(zip(before["stack_id"].to_list(),
                                                 before["top"].to_list(), strict=True))
        await pilot.press("T")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.top_rule == "outer"
        assert "by outermost user frame" in str(app.screen.query_one("#live-title").render())
        assert "Innermost" not in screen_text(app) and "Outermost user frame" in screen_text(app)
        after = app.stack_tops()
        assert (before.sort("stack_id")["top"] != after.sort("stack_id")["top"]).any()
        # the names the Slice Detail shows follow the rule too
        assert app.stack_top_names() == dict(zip(after["stack_id"].to_list(),
                                                 after["top"].to_list(), strict=True))
        await pilot.press("5")
        await app.workers.wait_for_complete()
        await pilot.pause()
        model = app.screen.model("blocks")
        assert model is not None


@pytest.mark.slow
@pytest.mark.parametrize("size", sizes(SIZES, short=(120, 40)), ids=lambda s: f"{s[0]}x{s[1]}")
async def test_stacks_user_frames_toggle_and_node_figures(demo, size):
    app = maps_app(demo)
    async with app.run_test(size=size) as pilot:
        await open_screen(pilot, "stacks", at_end=False)
        app.action_peak()
        await pilot.pause()
        screen = app.screen
        tree = screen.stack_tree  # user frames by default (issue 23)
        assert tree.user_only
        assert "user frames (u: all)" in str(screen.query_one("#status-line").render())
        files = [tree.frame_file.get(int(tree.frame[n])) or "" for n in range(2, tree.size)
                 if tree.depth[n] > 1]  # depth 1: a stack without user frames, its name
        assert all(f.endswith(".py") and "/torch/" not in f for f in files)
        text = screen_text(app)
        assert "share of all" in text
        if size[0] >= 100:
            assert "self  blocks  parent" in text
        detail = str(screen.query_one("#detail").render())
        assert "of all" in detail and "self" in detail
        await pilot.press("u")  # every frame, one key away
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.pause()
        assert not app.screen.stack_tree.user_only and app.screen.stack_tree is not tree
        assert "all frames (u: user)" in str(screen.query_one("#status-line").render())
        await pilot.press("u")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.screen.stack_tree.user_only


def accessed_toy_trace():
    """toy_trace with accesses on cuda:0: block 0 [1000, 3000) first touched at 2800
    (early: 90% of its life), block 1 [2000, 5000) last touched at 2200 (late: 93%);
    block 2 never touched.  Default thresholds: flags E, L, none."""
    import polars as pl

    from memtui.analysis.findings.flags import with_inefficient_flags
    from tests.helpers.toy_traces import toy_trace

    trace = toy_trace()
    blocks = trace.blocks.with_columns(
        first_access=pl.Series([2800, 2100, None, None], dtype=pl.Int64),
        last_access=pl.Series([2900, 2200, None, None], dtype=pl.Int64),
        max_access_gap=pl.Series([100, 100, None, None], dtype=pl.Int64))
    import dataclasses

    return with_inefficient_flags(dataclasses.replace(trace, blocks=blocks))


async def test_tables_filter_inefficient_blocks_with_editable_thresholds():
    app = maps_app(accessed_toy_trace())
    async with app.run_test(size=(120, 40)) as pilot:
        await open_screen(pilot, "tables", at_end=False)
        screen = app.screen
        await pilot.press("i")
        await app.workers.wait_for_complete()
        await pilot.pause()
        model = screen.model("blocks")
        assert sorted(model.frame["block_id"].gather(model.rows).to_list()) == [0, 1]
        header = str(screen.query_one("#tables-header").render())
        assert "early=50% late=50% idle=50%" in header
        await pilot.press("I")
        field = screen.query_one("#tables-input")
        field.value = "early=off"
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.trace.meta.extra["thresholds"].early_allocation.percent is None
        model = screen.model("blocks")
        assert model is not None
        assert model.frame["block_id"].gather(model.rows).to_list() == [1]  # only late left
        await pilot.press("i")  # all blocks again
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert screen.model("blocks").rows.size == 3


@pytest.mark.slow
@pytest.mark.parametrize("size", sizes(SIZES, short=(80, 24)), ids=lambda s: f"{s[0]}x{s[1]}")
async def test_trend_zoom_slider_and_reserved_peak(demo, size):
    from memtui.tui.widgets.block_map import TrendSlider
    from memtui.tui.widgets.curve import TrendPlot

    app = maps_app(demo)
    async with app.run_test(size=size) as pilot:
        await open_screen(pilot, "trend", at_end=False)
        screen = app.screen
        slider = screen.query_one(TrendSlider)
        timeline = app.timeline(app.cursor.device)
        assert (slider.t_start, slider.t_end) == (timeline.start, timeline.end)
        reserved = timeline.reserved
        top = int(reserved.values.max())
        plot = screen.query_one(TrendPlot)
        assert plot.reserved_peak[1] == top
        assert "△" in screen_text(app)
        if size[0] >= 90:
            assert "reserved peak" in str(screen.query_one("#trend-legend").render())
        v0, v1 = app.cursor.view
        await pilot.press("shift+right")
        await pilot.pause()
        assert app.cursor.view == (v0 + (v1 - v0) // 10, v1)
        w0, w1 = app.cursor.view
        await pilot.press("ctrl+left")
        await pilot.pause()
        assert app.cursor.view == (w0, w1 - (w1 - w0) // 10)
        assert slider.cursor.view == app.cursor.view  # the slider shades the new view


async def test_user_keymap_changes_keys_in_footer_help_and_palette(demo, tmp_path):
    from memtui.tui.app import MemtuiApp

    keymap = tmp_path / "keymap.toml"
    keymap.write_text('"app.peak" = "P"\n[keys]\n"stacks.user_frames" = ["U", "ctrl+u"]\n')
    app = MemtuiApp(demo, keymap_file=keymap)
    # 160 columns: the Stacks' own keys (R Role among them) fill 120 before the app's P
    async with app.run_test(size=(160, 40)) as pilot:
        await open_screen(pilot, "stacks", at_end=False)
        await pilot.press("P")
        await pilot.pause()
        assert app.cursor.t == app.timeline(app.cursor.device).peak_t
        text = screen_text(app)
        assert "P Peak" in text and "U User frames" in text  # the footer
        await pilot.press("U")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not app.screen.user_only  # from the user frames it opens on to every frame
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Go to the peak (P)" in titles and "Stacks: User frames (U, ^u)" in titles
        rows = {row[2]: row[0] for _, section in app.help_sections() for row in section
                if len(row) == 3}
        assert rows["app.peak"] == "P" and rows["stacks.user_frames"] == "U, ^u"


async def test_a_broken_keymap_is_reported_and_ignored(demo, tmp_path):
    from memtui.tui.app import MemtuiApp

    keymap = tmp_path / "keymap.toml"
    keymap.write_text("app.peak = = P\n")
    app = MemtuiApp(demo, keymap_file=keymap)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert any("keymap.toml" in w for w in app.app_warnings)  # counted in the status bar
        await pilot.press("p")
        await pilot.pause()
        assert app.cursor.t == app.timeline(app.cursor.device).peak_t


async def test_a_failed_worker_is_one_clear_message_and_nothing_hangs(demo, monkeypatch):
    from memtui.analysis.tables import TableModel
    from memtui.tui.screens import linked
    from memtui.tui.screens.blocks import BlocksScreen

    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(TableModel, "sort", boom)
    monkeypatch.setattr(BlocksScreen, "prepare", boom)
    monkeypatch.setattr(linked, "BACKGROUND_BLOCKS", 0)  # prepare in a worker
    app = maps_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_screen(pilot, "tables", at_end=False)
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.return_code is None  # still running, no traceback on screen
        messages = [n.message for n in app._notifications]
        assert any(m.startswith("sorting failed: RuntimeError: boom") for m in messages)
        assert app.screen.table.busy == "sorting failed"
        await pilot.press("2")
        await app.workers.wait_for_complete()
        await pilot.pause()
        status = str(app.screen.query_one("#status-line").render())
        assert "failed" in status and "indexing" in status
        assert app.return_code is None


@pytest.mark.slow
@pytest.mark.parametrize("size", sizes(SIZES, short=(120, 40)), ids=lambda s: f"{s[0]}x{s[1]}")
async def test_capture_facts_view(size):
    from memtui.loading import load_trace
    from memtui.tui.screens.modals import FactsScreen
    from tests.conftest import require_shared

    path = require_shared("torch_snapshots") / "t26_cs336_kk_ctx512_fullstep.pickle"
    if not path.exists():
        pytest.skip(f"{path} is absent")

    app = maps_app(load_trace(path))
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.press("A")
        await pilot.pause()
        assert isinstance(app.screen, FactsScreen)
        sections = dict(app.screen.sections)
        settings = dict(sections["Allocator settings"])
        assert settings["expandable_segments"] == "False"
        assert "Python and C++" in dict(sections["Capture"])["call stacks"]
        assert "Capture facts" in screen_text(app)
        await pilot.press("escape")
        assert not isinstance(app.screen, FactsScreen)


def binding_keys(bindings) -> dict[str, str]:
    """key -> binding id (or action) of a BINDINGS list."""
    from textual.binding import Binding

    keys = {}
    for binding in bindings:
        if not isinstance(binding, Binding):
            binding = Binding(*binding)
        for key in binding.key.split(","):
            keys[key.strip()] = binding.id or binding.action
    return keys


def test_no_screen_key_hides_an_app_key():
    """A screen's binding wins over the app's on that screen: a screen key equal to an
    app-wide one (Stacks' thread ``t`` hid the memory layer ``t``) makes the app's key
    unreachable there.  Keys shared on purpose (compare mode's ``tab``) are priority
    bindings of the app and are listed here."""
    from memtui.tui.app import MemtuiApp
    from memtui.tui.compare_app import CompareApp
    from memtui.tui.ranks_app import RanksApp
    from memtui.tui.screens import SCREENS
    from memtui.tui.screens.diff import DiffScreen
    from memtui.tui.screens.ranks import RanksScreen

    for app_class in (MemtuiApp, CompareApp, RanksApp):
        app_keys = binding_keys(app_class.BINDINGS)
        if app_class is CompareApp:
            app_keys = {**binding_keys(MemtuiApp.BINDINGS), **app_keys}
            app_keys.pop("tab")  # priority: A/B wins over the Tables' tab (E there)
        for screen in (*SCREENS.values(), DiffScreen, RanksScreen):
            clashes = set(binding_keys(screen.BINDINGS)) & set(app_keys)
            assert not clashes, f"{screen.__name__} hides {app_class.__name__}'s " \
                                f"{sorted(clashes)}"
    assert binding_keys(SCREENS["stacks"].BINDINGS)["e"] == "stacks.thread"


@pytest.mark.slow
@pytest.mark.parametrize("size", sizes(SIZES, short=(80, 24)), ids=lambda s: f"{s[0]}x{s[1]}")
async def test_an_empty_window_is_refused_with_a_toast(demo, size):
    """QA: ``[`` then ``]`` at the same event selected an empty window [t, t]."""
    app = maps_app(demo)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.press("p", "left_square_bracket")
        await pilot.pause()
        t = app.cursor.t
        assert app.cursor.window == (t, app.cursor.view[1])
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert app.cursor.window == (t, app.cursor.view[1])  # unchanged
        toast = app._notifications
        assert any("No empty window: its start is at this time too" in n.message
                   and "press ] again" in n.message for n in toast)
        await pilot.press("right", "right_square_bracket")
        await pilot.pause()
        assert app.cursor.window[0] == t < app.cursor.window[1] == app.cursor.t


def test_a_keymap_never_takes_the_key_of_quit_or_help():
    """Issue 23 point 9: ``"app.peak" = "q"`` left no Quit key.  An entry taking a key of
    Quit or Help (as the keymap leaves them: ``?`` is ``question_mark``) is dropped and said;
    Quit moved elsewhere frees ``q``."""
    from memtui.tui.keymap import keep_quit_and_help, unknown_ids

    defaults = {"app.quit": "q", "app.help": "question_mark", "app.peak": "p"}
    kept, problem = keep_quit_and_help({"app.peak": "q", "app.zoom_in": "?,z"}, defaults)
    assert kept == {}
    assert problem == ("ignored app.peak = 'q': app.quit keeps its key; "
                       "ignored app.zoom_in = '?,z': app.help keeps its key")
    moved = {"app.peak": "q", "app.quit": "ctrl+x"}
    assert keep_quit_and_help(moved, defaults) == (moved, None)
    assert unknown_ids({"app.peak": "P", "app.pek": "x"}, set(defaults)) == (
        "ignored app.pek: no binding has that id (? lists them)")
    assert unknown_ids({"app.peak": "P"}, set(defaults)) is None


async def test_a_keymap_with_a_typo_or_a_stolen_quit_key_is_said_once(demo, tmp_path):
    """Issue 23 point 9: an unknown binding id was silently ignored and ``"app.peak" = "q"``
    took Quit's key.  Both are said once at the start; q still quits, P still peaks."""
    from memtui.tui.app import MemtuiApp

    keymap = tmp_path / "keymap.toml"
    keymap.write_text('"app.peak" = "q"\n"app.zoom_in" = "Z,+"\n"stacks.usr_frames" = "U"\n')
    app = MemtuiApp(demo, keymap_file=keymap)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        said = [w for w in app.app_warnings if "keymap" in w]
        assert said == [f"{keymap}: ignored app.peak = 'q': app.quit keeps its key",
                        f"{keymap}: ignored stacks.usr_frames: no binding has that id "
                        "(? lists them)"]
        assert app.active_bindings["q"].binding.action == "quit"
        assert app.active_bindings["plus"].binding.action == "zoom_in"  # the rest applies
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_ctrl_c_says_how_to_quit_in_plain_words(demo):
    """Issue 23 point 9: ctrl+c showed the literal ``Press [b]ctrl+q[/b] to quit the app``
    (Textual's markup, shown raw by the app's plain-text toasts)."""
    from memtui.tui.app import MemtuiApp

    app = MemtuiApp(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert [n.message for n in app._notifications] == ["Press q or ^q to quit the app"]


async def test_the_help_opened_at_once_stays_and_scrolls_with_pagedown(monkeypatch):
    """Issue 23 point 9: ``?`` pressed before the findings arrived was hidden by the switch
    to the Findings screen (which then took PageDown): the help stays, and scrolls."""
    import threading

    from memtui.analysis import findings
    from memtui.tui.app import MemtuiApp
    from memtui.tui.screens.modals import HelpScreen
    from tests.conftest import REPO

    found = threading.Event()
    original = findings.find_all

    def held(trace):  # the findings wait until the help is open
        found.wait(30)
        return original(trace)

    monkeypatch.setattr(findings, "find_all", held)
    app = MemtuiApp(REPO / "snapshots" / "demo_training.pickle")  # findings_first: a path
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(500):
            if app.cursor is not None:
                break
            await pilot.pause(0.02)
        await pilot.press("question_mark")
        assert app.findings is None  # the help came first
        found.set()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.findings and isinstance(app.screen, HelpScreen)
        box = app.screen.query_one("#help-box")
        await pilot.press("pagedown")
        await pilot.pause()
        assert box.scroll_y > 0
    app = MemtuiApp(REPO / "snapshots" / "demo_training.pickle")
    async with app.run_test(size=(80, 24)) as pilot:  # nothing over the Trend: it switches
        await app.workers.wait_for_complete()
        for _ in range(100):
            if app.current_mode == "findings":
                break
            await pilot.pause(0.05)
        assert app.current_mode == "findings"


async def test_the_palette_says_what_each_tables_key_does_and_finds_export(demo):
    """Issue 23 point 9: every palette entry of the Tables screen read "The Tables
    screen's key", and "export" found nothing though the CSV export exists."""
    from textual.command import CommandPalette

    from memtui.tui.app import MemtuiApp

    app = MemtuiApp(demo, findings_first=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        found = {c.title: c.help for c in app.get_system_commands(app.screen)}
        assert "Export a table as CSV" in found  # from any screen
        await pilot.press("5")
        await app.workers.wait_for_complete()
        await pilot.pause()
        commands = [c for c in app.get_system_commands(app.screen)
                    if c.title.startswith("Tables: ")]
        helps = [c.help for c in commands]
        assert len(commands) >= 10 and len(set(helps)) == len(helps)
        assert not any("screen's key" in h for h in helps)
        assert {c.title: c.help for c in commands}["Tables: Export CSV (C)"].startswith(
            "Save every shown row to a CSV file")
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"export")
        await pilot.pause(0.5)
        palette = app.screen
        assert isinstance(palette, CommandPalette)
        shown = [str(option.prompt) for option in palette.query_one("CommandList").options]
        assert any("Export CSV (C)" in prompt for prompt in shown), shown
