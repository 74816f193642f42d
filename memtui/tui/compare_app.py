"""Compare mode: two captures in one app, one cursor over both (``memtui A B``).

:class:`CompareApp` is a :class:`~memtui.tui.app.MemtuiApp` that holds two traces and
shows one of them at a time (``app.side``: ``"a"`` or ``"b"``): ``app.trace`` is the shown
run, so every screen of the single-capture app works unchanged on it.  ``tab`` switches
the run: the cursor (time, view, window) goes to the aligned point of the other run and
the run's screens are built afresh.  The Trend becomes
:class:`~memtui.tui.screens.compare_trend.CompareTrendScreen` (both curves on one axis,
B - A under them) and key ``7`` shows the
:class:`~memtui.tui.screens.diff.DiffScreen` (the attributed deltas).  ``<`` ``>`` shift B
against A and ``a`` switches the alignment (:mod:`memtui.analysis.across.compare`).

API for its screens, beyond MemtuiApp's: ``app.comparison_for(device)`` (the
:class:`~memtui.analysis.across.compare.DeviceComparison` of the shown run's device, or None),
``app.side`` / ``app.other_side``, ``app.side_label(side)``, ``app.alignment_text(device)``,
``app.select_difference(row)``, and the reactive ``app.comparison_key`` that changes
whenever the alignment does.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import ClassVar

import numpy as np
from textual import events
from textual.binding import Binding, BindingType
from textual.reactive import reactive

from memtui.analysis.across.compare import (
    ALIGNMENTS,
    Comparison,
    DeviceComparison,
    blocks_of,
    compare,
    device_bounds,
    on_axis,
    realign,
)
from memtui.errors import CaptureError, printable
from memtui.loading import check_input
from memtui.model import MemoryTrace
from memtui.tui.app import (
    EXIT_BAD_INPUT,
    MemtuiApp,
    initial_device,
    run_to_exit,
)
from memtui.tui.cursor import CursorState
from memtui.tui.screens import SCREENS
from memtui.tui.screens.compare_trend import CompareTrendScreen
from memtui.tui.screens.diff import DiffScreen
from memtui.tui.screens.modals import LoadingScreen

SIDES = ("a", "b")
#: The screens that show one run: rebuilt when ``tab`` switches the run.
RUN_SCREENS = {**SCREENS, "trend": CompareTrendScreen}
#: ``<`` ``>`` move B by this share of its events or time (by one step when aligned by step).
SHIFT_SHARE = 0.01


class CompareApp(MemtuiApp):
    """See the module docstring."""

    MODES: ClassVar = {**RUN_SCREENS, "diff": DiffScreen}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("7", "show_screen('diff')", "Diff"),
        Binding("tab", "switch_run", "A/B", priority=True),
        Binding("less_than_sign", "shift(-1)", "Shift B back", show=False),
        Binding("greater_than_sign", "shift(1)", "Shift B on", show=False),
        Binding("a", "alignment", "Align", show=False),
        Binding("E", "tables_view", "Blocks/Events"),  # tab, the Tables' own key, is A/B
    ]

    comparison_key: reactive[int] = reactive(0, init=False)

    def __init__(self, a: str | Path | MemoryTrace, b: str | Path | MemoryTrace) -> None:
        given = isinstance(a, MemoryTrace) and isinstance(b, MemoryTrace)
        super().__init__(a if given else None, trace_path=None if given else a,
                         open_at_answer=False)  # the two runs align on their own axis
        self.paths = (Path(str(a)) if not given else None, Path(str(b)) if not given else None)
        self.traces: list[MemoryTrace] = [a, b] if given else []  # type: ignore[list-item]
        self.comparison: Comparison | None = None
        self.side = "a"
        self.align_mode = None  # alignment mode (None: the default)
        self.shift = 0
        self._run_caches: dict[str, tuple] = {}
        self._run_filters: dict[str, tuple] = {}  # side -> (device, block ids, label)
        self._stack_search: dict[str, str] = {}  # side -> frame name to find on Stacks
        self._moment: str | None = None  # "peak" / "end" of the chosen difference
        self._axes: dict[tuple, tuple] = {}  # (id(pair), side) -> on_axis levels

    # -- loading --------------------------------------------------------------------------

    def on_mount(self, event: events.Mount) -> None:
        event.prevent_default()  # MemtuiApp's on_mount would load one capture
        if self.traces:
            self._start_pair(self.traces[0], self.traces[1], compare(*self.traces))
            return
        names = " / ".join(printable(p.name) for p in self.paths if p is not None)
        self.sub_title = names
        self.push_screen(LoadingScreen(names))
        self.loading = True
        # a daemon thread, as MemtuiApp's loader: a quit during the load ends the process
        threading.Thread(target=self._load_pair, name="memtui-load-pair", daemon=True).start()

    def _load_pair(self) -> None:
        """Both captures, their comparison and the Trend's curves (in the loader thread);
        a bug crashes the app as one in its own loop would (exit 1)."""
        try:
            self._load_pair_and_report()
        except Exception as error:
            if self.is_running:
                self.call_from_thread(self._handle_exception, error)

    def _load_pair_and_report(self) -> None:
        from memtui.loading import load_traces

        screen = self.screen
        shares = [0.0, 0.0]

        def progress(index: int, fraction: float, message: str) -> None:
            shares[index] = fraction
            if isinstance(screen, LoadingScreen):
                self.call_from_thread(screen.set_progress, sum(shares) / 2,
                                      f"{'AB'[index]}: {message}")

        try:
            a, b = load_traces([p for p in self.paths if p is not None], progress,
                               store_in_background=True)
            result = compare(a, b)
            axes = {(id(d), side): on_axis(d, side) for d in result.devices[:1]
                    for side in SIDES}
        except CaptureError as exc:
            self.call_from_thread(self._load_failed, str(exc))
            return
        finally:
            self.loading = False
        self.call_from_thread(self._start_pair, a, b, result, axes)

    def _start_pair(self, a: MemoryTrace, b: MemoryTrace, result: Comparison,
                    axes: dict | None = None) -> None:
        self.traces = [a, b]
        self.comparison = result
        self._axes = dict(axes or {})
        self._start(a)
        pairs = [d.device_a for d in result.devices]
        if self.cursor is not None and self.cursor.device not in pairs and pairs:
            self.move_cursor(device=pairs[0])
        self.sub_title = f"A {self.side_label('a')} / B {self.side_label('b')}"

    # -- the comparison ---------------------------------------------------------------------

    @property
    def other_side(self) -> str:
        return "b" if self.side == "a" else "a"

    def side_label(self, side: str, short: bool = False) -> str:
        """``A clean.pickle`` (``short``: the file name cut to 18 characters)."""
        index = SIDES.index(side)
        if not self.traces:
            return side.upper()
        name = printable(Path(self.traces[index].meta.path).name)
        if short and len(name) > 18:
            name = name[:8] + "…" + name[-9:]
        return f"{side.upper()} {name}"

    def comparison_for(self, device: str) -> DeviceComparison | None:
        """The device pair holding ``device`` of the shown run (None: it has no pair)."""
        if self.comparison is None:
            return None
        for pair in self.comparison.devices:
            if (pair.device_a if self.side == "a" else pair.device_b) == device:
                return pair
        return None

    def axis_levels(self, pair: DeviceComparison, side: str | None = None) -> tuple:
        """:func:`~memtui.analysis.across.compare.on_axis` of ``pair`` on ``side``'s axis (the
        shown run's by default), computed once per alignment."""
        side = side or self.side
        key = (id(pair), side)
        if key not in self._axes:
            self._axes = {k: v for k, v in self._axes.items()
                          if any(id(d) == k[0] for d in self.comparison.devices)}
            self._axes[key] = on_axis(pair, side)
        return self._axes[key]

    def alignment_text(self, device: str) -> str:
        pair = self.comparison_for(device)
        if pair is None:
            return ""
        align = pair.alignment
        text = f"aligned by {align.mode} (a)"
        if align.mode == "step":
            text += f", {align.steps} step pairs"
        if align.shift:
            unit = {"step": "steps", "position": "events"}.get(align.mode, "")
            if align.mode == "time":
                unit = "events" if self.trace.meta.time_unit == "event" else "ns"
            text += f", B shifted {align.shift:+,} {unit} (< >)"
        return text

    def _realign(self) -> None:
        a, b = self.traces
        devices = [realign(d, a, b, self.align_mode, self.shift) for d in self.comparison.devices]
        self.comparison = Comparison(a, b, devices, devices[0].alignment.mode if devices
                                     else self.comparison.mode)
        self.comparison_key += 1

    def action_shift(self, direction: int) -> None:
        pair = self.comparison_for(self.cursor.device) if self.cursor else None
        if pair is None:
            return
        mode = pair.alignment.mode
        if mode == "step":
            unit = 1
        elif mode == "position":
            unit = max(1, int(self.traces[1].device_events(pair.device_b).height * SHIFT_SHARE))
        else:
            b0, b1 = device_bounds(self.traces[1], pair.device_b)
            unit = max(1, int((b1 - b0) * SHIFT_SHARE))
        self.align_mode, self.shift = mode, self.shift + direction * unit
        self._realign()
        self.notify(self.alignment_text(self.cursor.device), timeout=3)

    def action_alignment(self) -> None:
        pair = self.comparison_for(self.cursor.device) if self.cursor else None
        if pair is None:
            return
        now = pair.alignment.mode
        self.align_mode = ALIGNMENTS[(ALIGNMENTS.index(now) + 1) % len(ALIGNMENTS)]
        self.shift = 0
        self._realign()
        got = self.comparison_for(self.cursor.device).alignment.mode
        if got != self.align_mode:
            self.notify(f"cannot align by {self.align_mode} here: aligned by {got}", timeout=4)
            self.align_mode = got
        else:
            self.notify(self.alignment_text(self.cursor.device), timeout=3)

    # -- switching the run --------------------------------------------------------------------

    def _mapped_cursor(self, cursor: CursorState) -> dict:
        """Where the cursor goes on the other run: the paired device, its time, view and
        window through the alignment (``move_cursor``'s arguments)."""
        pair = self.comparison_for(cursor.device)
        target = self.traces[SIDES.index(self.other_side)]
        if pair is None:
            return {"device": initial_device(target) or cursor.device, "t": cursor.t,
                    "view": cursor.view, "window": None}
        to_other = pair.alignment.a_to_b if self.side == "a" else pair.alignment.b_to_a
        device = pair.device_b if self.side == "a" else pair.device_a
        t, v0, v1 = (int(x) for x in to_other(np.array([cursor.t, *cursor.view])))
        window = None
        if cursor.window is not None:
            w0, w1 = (int(x) for x in to_other(np.array(cursor.window)))
            window = (w0, w1)
        return {"device": device, "t": t, "view": (v0, max(v1, v0 + 1)), "window": window}

    async def action_switch_run(self) -> None:
        if self.cursor is None or len(self.traces) != 2:
            return
        mode = self.current_mode
        mapped = self._mapped_cursor(self.cursor)
        self._run_caches[self.side] = (self._timelines, self._live, self._tops)
        self.side = self.other_side
        self.trace = self.traces[SIDES.index(self.side)]
        self._timelines, self._live, self._tops = self._run_caches.get(self.side, ({}, {}, None))
        if mode != "diff":
            await self.switch_mode("diff")
        for name in RUN_SCREENS:
            await self.remove_mode(name)
            self.add_mode(name, RUN_SCREENS[name])
        timeline = self.timeline(mapped["device"])
        event_at = getattr(timeline, "event_at", None)
        if event_at is not None and "event" in CursorState.__dataclass_fields__:
            # a cursor that addresses events: A's event number means nothing in B, so
            # take B's last event at or before the mapped time
            t = min(max(mapped["t"], timeline.start), timeline.end)
            mapped["event"] = event_at(t)
        self.move_cursor(**mapped, block_id=None, segment_id=None)
        if self.side in self._stack_search:  # a chosen difference: this run's own moment
            self._go_to_moment()
        self.block_filter = self._run_filters.get(self.side)
        if mode != "diff":
            await self.switch_mode(mode)
            self._after_show(mode)
        self.comparison_key += 1
        for bar in self.screen.query("StatusBar"):  # the cursor may map onto an equal one
            bar.refresh()
        self.notify(f"showing {self.side_label(self.side)}", timeout=2)

    def help_sections(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """MemtuiApp's sections, its own keys under "Everywhere" and these under "Compare"."""
        sections = super().help_sections()  # "Everywhere" lists self.BINDINGS: the ones here

        def rows(bindings) -> list[tuple[str, str]]:
            return [(", ".join(self.get_key_display(Binding(key, ""))
                               for key in b.key.split(",")), b.description or b.action)
                    for b in bindings if isinstance(b, Binding)]

        sections[0] = ("Everywhere", rows(MemtuiApp.BINDINGS))
        sections.insert(1, ("Compare", rows(CompareApp.BINDINGS)))
        return sections

    def status_prefix(self) -> str:
        """What the status bar says first: the shown run."""
        return self.side.upper()

    # -- selecting a difference ----------------------------------------------------------------

    def select_difference(self, row: dict) -> None:
        """Diff's Enter: both runs' Stacks search the row's frame and both Block tables show
        only its blocks (alive where the row counts them); shows this run's Stacks (a
        stack) or Tables (an owner or op).  A row whose blocks are all in the other run
        (``only in B`` while A is shown) shows the other run's, which hold its frame."""
        pair = self.comparison_for(self.cursor.device)
        if pair is None:
            return
        ids_a, ids_b = blocks_of(pair, row["kind"], row["key"], row["at"])
        label = (f"{row['label']} at {row['at']}" if row["kind"] == "stack"
                 else f"{row['kind']} {row['label']} at {row['at']}")
        self._run_filters = {"a": (pair.device_a, ids_a, label), "b": (pair.device_b, ids_b, label)}
        if row["kind"] == "stack" and row["label"] and not row["label"].startswith("("):
            only = row.get("only_in")  # a frame one run never ran: search it there alone
            self._stack_search = {side: row["label"] for side in SIDES
                                  if only in (None, "", side)}
        else:
            self._stack_search = {}
        self._moment = row["at"]
        if not (ids_a.size or ids_b.size):
            self.block_filter = self._run_filters[self.side]
            self._go_to_moment()
            self.notify("no block of either run is behind this row", severity="warning")
            return
        shown, other = (ids_a, ids_b) if self.side == "a" else (ids_b, ids_a)
        target = "stacks" if self._stack_search else "tables"
        if not shown.size:  # e.g. a row only in B while A is shown: B holds it
            self.notify(f"showing {self.other_side.upper()}: {self.side.upper()} has no "
                        "block behind this row", timeout=5)
            self.run_worker(self._show_in_other_run(target), group="diff-choose",
                            exclusive=True)
            return
        self.block_filter = self._run_filters[self.side]
        self._go_to_moment()
        if self.current_mode == target == "tables":
            self.screen._take_block_filter()  # type: ignore[attr-defined]
        self.switch_mode(target)
        self._after_show(target)

    async def _show_in_other_run(self, target: str) -> None:
        """Switch to the other run (its cursor at the chosen moment, its filter on) and
        show its ``target`` screen."""
        await self.action_switch_run()
        self._go_to_moment()
        await self.switch_mode(target)
        self._after_show(target)

    def _go_to_moment(self) -> None:
        """The cursor to the chosen difference's moment in the shown run: its peak or end."""
        if self._moment is None or self.cursor is None:
            return
        timeline = self.timeline(self.cursor.device)
        self.move_cursor(t=timeline.peak_t if self._moment == "peak" else timeline.end)

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action == "tables_view":
            return self.current_mode == "tables"
        return super().check_action(action, parameters)

    def action_tables_view(self) -> None:
        switch = getattr(self.screen, "action_switch_view", None)
        if self.current_mode == "tables" and switch is not None:
            switch()

    def action_show_screen(self, name: str) -> None:
        super().action_show_screen(name)
        self._after_show(name)

    def _after_show(self, name: str) -> None:
        """Run the pending Stacks search of the shown run once its screen is ready."""
        if name != "stacks" or self.side not in self._stack_search:
            return
        tries = [0]

        def attempt() -> None:
            screen = self.screen
            tries[0] += 1
            ready = getattr(screen, "ready", False) and self.current_mode == "stacks"
            if ready and self.side in self._stack_search:
                screen.select_label(self._stack_search.pop(self.side))
                timer.stop()
            elif tries[0] > 100 or self.current_mode != "stacks":
                timer.stop()

        timer = self.set_interval(0.05, attempt)


def run_compare(path_a: str | Path, path_b: str | Path) -> int:
    """Open two captures in compare mode; the exit status as :func:`run_app`'s (2 where
    one cannot be read, 1 for a crash, said in one line)."""
    paths = (Path(path_a), Path(path_b))
    try:
        for path in paths:
            check_input(path)
    except CaptureError as exc:
        print(f"memtui: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return run_to_exit(CompareApp(*paths))


__all__ = ["CompareApp", "run_compare"]
