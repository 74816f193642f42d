"""The Findings screen (6) with Pilot at 80x24: first when a finding is of high severity,
one line per finding, Enter moves the shared cursor to the evidence and shows it."""

from __future__ import annotations

import numpy as np

from memtui.analysis.findings import find_all, flat
from memtui.loading import load_trace
from memtui.tui.app import MemtuiApp
from memtui.tui.screens.findings import FindingsScreen
from memtui.tui.screens.tables import TablesScreen
from memtui.units import format_bytes
from tests.conftest import REPO
from tests.helpers.findings_traces import DEVICE, training_loop
from tests.helpers.toy_traces import ready, settle, status_text, toy_trace

DEMO_OOM = REPO / "snapshots" / "demo_oom.pickle"
SIZE = (80, 24)


async def _select(pilot, kind: str) -> None:
    screen = pilot.app.screen
    assert isinstance(screen, FindingsScreen)
    index = [f.kind for f in screen.items].index(kind)
    for _ in range(index):
        await pilot.press("down")
    await pilot.press("enter")
    await settle(pilot)


async def test_oom_capture_opens_on_findings_and_enter_shows_the_pool():
    trace = load_trace(DEMO_OOM)
    oom = next(f for f in flat(find_all(trace)) if f.kind == "oom")
    app = MemtuiApp(trace, findings_first=True)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.current_mode == "findings"
        screen = app.screen
        assert screen.items[0].kind == "oom"
        found = f"{len(flat(find_all(trace)))} found"  # the oom, a leak, savings, the peak...
        assert found == "8 found"
        assert found in status_text(app)
        await pilot.press("enter")
        await settle(pilot)
        assert app.current_mode == "pool"
        assert app.cursor.t == oom.evidence.t
        assert found in status_text(app)  # the badge on every screen


async def test_enter_on_a_leak_filters_the_tables_to_its_blocks():
    trace = training_loop(10, markers=False)
    leak = next(f for f in flat(find_all(trace)) if f.kind == "leak")
    app = MemtuiApp(trace, findings_first=True)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.current_mode == "findings"
        await _select(pilot, "leak")
        assert app.current_mode == "tables"
        screen = app.screen
        assert isinstance(screen, TablesScreen)
        only = screen.models[("blocks", DEVICE)].only
        assert sorted(np.asarray(only).tolist()) == sorted(leak.evidence.block_ids)
        assert app.cursor.block_id == leak.evidence.block_ids[0]
        assert app.cursor.window == leak.evidence.window


async def test_enter_on_the_peak_shows_the_stacks_at_the_peak():
    trace = training_loop(6)
    app = MemtuiApp(trace, findings_first=True)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await _select(pilot, "peak")
        assert app.current_mode == "stacks"
        assert app.cursor.t == app.timeline(DEVICE).peak_t


async def test_enter_on_a_savings_finding_filters_the_tables_to_its_roles_blocks():
    """A savings finding's evidence is its role's blocks alive at the peak: Enter shows them
    in the Tables (it raised KeyError: the screen had no destination for ``savings``)."""
    trace = load_trace(DEMO_OOM)
    saving = next(f for f in flat(find_all(trace)) if f.kind == "savings")
    assert saving.evidence.block_ids
    app = MemtuiApp(trace, findings_first=True)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await _select(pilot, "savings")
        assert app.current_mode == "tables"
        only = app.screen.models[("blocks", saving.device)].only
        assert sorted(np.asarray(only).tolist()) == sorted(saving.evidence.block_ids)


async def test_without_high_findings_the_trend_stays_and_6_shows_them():
    app = MemtuiApp(toy_trace(), findings_first=True)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.current_mode == "trend"
        await pilot.press("6")
        await settle(pilot)
        assert app.current_mode == "findings"
        lines = [str(option.prompt) for option in app.screen.query_one("#findings-list")
                 .options]
        assert lines and all(line.split()[0] in ("HIGH", "MED", "LOW", "info")
                             for line in lines)


def test_sparkline():
    from memtui.tui.screens.findings import sparkline

    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7], 8) == "▁▂▃▄▅▆▇█"
    assert sparkline([5, 5, 5], 10) == "▁▁▁"
    assert sparkline(list(range(100)), 10) == "▁▁▂▃▄▄▅▆▇█"


async def test_enter_on_the_peak_selects_the_top_stack_on_stacks():
    """The Stacks tree at the peak with the node of the peak's top stack selected: the
    frame the finding names it by (``init_params``), not the tree's default selection."""
    trace = training_loop(6)
    peak = next(f for f in flat(find_all(trace)) if f.kind == "peak")
    top = peak.detail["by_stack"][0]["label"]
    app = MemtuiApp(trace, findings_first=True)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await _select(pilot, "peak")
        assert app.current_mode == "stacks"
        screen = app.screen
        await settle(pilot)
        tree, node = screen.stack_tree, screen.tree_view.selected
        assert node != 0
        assert tree.label(node) == top.replace(" (", "  ", 1).removesuffix(")")
        on_path = tree.pair_node[tree.pair_stack == peak.evidence.stack_id]
        assert node in on_path
        assert app.stack_request is None  # taken


def test_the_oom_detail_names_its_figures_in_words():
    """QA: the OOM finding's figures said ``pool free bytes``, ``largest gap bytes``
    (key names); now readable labels, each key of the detail has one."""
    from memtui.tui.screens.findings import detail_text

    trace = load_trace(DEMO_OOM)
    oom = next(f for f in flat(find_all(trace)) if f.kind == "oom")
    lines = detail_text(oom, "+1 s", lambda t: "+2 s").plain.splitlines()
    figures = "\n".join(line for line in lines if line.startswith("  ") and "  " in line[2:])
    assert "largest free gap" in figures and "free in the pool" in figures
    assert "bytes" not in figures and "_" not in figures
    for key in oom.detail:
        assert "_" not in key or key not in "\n".join(lines)


def test_a_savings_detail_names_the_role_figure_it_uses():
    """The savings finding's figures in words: the role, the bytes it holds at the peak
    (said ``role 3.2 GiB`` before) and what the change would save."""
    from memtui.tui.screens.findings import detail_text

    trace = load_trace(DEMO_OOM)
    saving = next(f for f in flat(find_all(trace)) if f.kind == "savings"
                  and f.detail["role"] == "activation")
    text = detail_text(saving, "+1 s", lambda t: "+2 s").plain
    role = format_bytes(saving.detail["role_bytes"])
    lines = [line.split() for line in text.splitlines()]  # one figure a line (item 9)
    assert ["role", "activation"] in lines
    assert ["the", "role", "holds", *role.split()] in lines
    assert ["would", "save", "up", "to", *format_bytes(saving.detail["saving_bytes"]).split()] \
        in lines
    assert "role_bytes" not in text and "saving_bytes" not in text


async def test_findings_arriving_while_the_app_exits_switch_nothing():
    """q pressed while the findings worked: their late arrival must not switch the mode
    (a switch during textual's close changed the screen stacks it was pruning)."""
    trace = load_trace(DEMO_OOM)
    found = find_all(trace)
    app = MemtuiApp(trace, findings_first=True)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("1")  # back on the Trend, as if the findings had not come yet
        await settle(pilot)
        assert app.current_mode == "trend"
        app.user_acted = False  # untouched, so a finding of high severity would switch
        app.exit()
        app._findings_ready(app.trace, found)
        assert app.current_mode == "trend"
