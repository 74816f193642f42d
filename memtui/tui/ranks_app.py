"""The app over several ranks: the Ranks screen first, one rank's full model at a time.

:class:`RanksApp` is :class:`~memtui.tui.app.MemtuiApp` with a ``ranks`` mode (key ``r``)
that it opens on.  A thread worker streams the per-rank results (computed in a process
pool, or on a Dask cluster, by :func:`memtui.rankload.stream_results`) into
``rank_table`` and bumps ``ranks_version``, which the Ranks screen watches.  Only the
small rows are kept; the full model of a rank is loaded when the user opens it (Enter on
the Ranks screen, or ``d`` on any screen), replacing the one open before, so memory stays
bounded by one full rank plus the rows.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import events, work
from textual.binding import Binding, BindingType
from textual.reactive import reactive

from memtui.analysis.across.ranks import RankRow
from memtui.analysis.timeline.at_time import Timeline
from memtui.errors import CaptureError
from memtui.model import MemoryTrace
from memtui.rankload import RankResult, RankTable, stream_results
from memtui.tui.app import MemtuiApp
from memtui.tui.screens import SCREENS
from memtui.tui.screens.modals import DeviceScreen, LoadingScreen
from memtui.tui.screens.ranks import RanksScreen
from memtui.units import counted, format_bytes

if TYPE_CHECKING:
    from memtui.sources.ranks import Discovery

RANKS = "ranks"


class RanksApp(MemtuiApp):
    """See the module docstring."""

    MODES: ClassVar = {**SCREENS, RANKS: RanksScreen}
    BINDINGS: ClassVar[list[BindingType]] = [
        *MemtuiApp.BINDINGS,
        Binding("r", "show_ranks", "Ranks"),
    ]

    ranks_version: reactive[int] = reactive(0, init=False)

    def __init__(self, discovery: Discovery, *, cluster: str | None = None,
                 workers: int | None = None, how: str = "pool",
                 connect_timeout: float = 5.0) -> None:
        super().__init__(open_at_answer=False)  # it opens on the Ranks table
        self.discovery = discovery
        self.cluster = cluster
        self.connect_timeout = connect_timeout
        self.rank_workers = workers
        self.how = how
        self.rank_table = RankTable(len(discovery.captures))
        self.rank_table.warnings.extend(discovery.warnings)
        self.open_row: RankRow | None = None
        self._stop = threading.Event()
        #: Why reading the ranks stopped (a bug: shown on the Ranks screen), else None.
        self.stream_error: str | None = None

    # -- streaming the ranks in -----------------------------------------------------------

    def on_mount(self, event: events.Mount) -> None:
        event.prevent_default()  # not MemtuiApp's: it would load one path
        self.sub_title = counted(len(self.discovery.captures), "rank")
        self.switch_mode(RANKS)
        self._stream()

    @work(thread=True, exclusive=True, group="ranks", description="reading the ranks",
          exit_on_error=False)
    def _stream(self) -> None:
        try:
            for result in stream_results(self.discovery.captures, how=self.how,
                                         cluster=self.cluster, workers=self.rank_workers,
                                         stop=self._stop,
                                         connect_timeout=self.connect_timeout):
                if self._stop.is_set():
                    return
                self.call_from_thread(self._rank_arrived, result)
        except CaptureError as exc:  # --cluster without dask, or no scheduler there
            if not self._stop.is_set():
                self.call_from_thread(self._stream_failed, str(exc))

    def _rank_arrived(self, result: RankResult) -> None:
        self.rank_table.add(result)
        if result.error is not None:
            self.notify(result.error, title="skipped", severity="warning", timeout=8)
        self.ranks_version += 1
        if self.rank_table.done == self.rank_table.expected and not self.rank_table.rows:
            self._stream_failed("no rank could be read")

    def _stream_failed(self, message: str) -> None:
        self.load_error = message
        self.exit(2, return_code=2)

    async def action_quit(self) -> None:
        self._stop.set()
        await super().action_quit()

    def on_unmount(self, _event: events.Unmount) -> None:
        self._stop.set()

    # -- opening one rank ---------------------------------------------------------------

    def open_rank(self, row: RankRow) -> None:
        """Show ``row``'s rank in the other screens (loading its full model if needed)."""
        if self.open_row is not None and self.trace is not None and \
                self.open_row.path == row.path:
            self.open_row = row
            if row.device != self.cursor.device:
                self.move_cursor(device=row.device)
            self.switch_mode("trend")
            return
        if self.current_mode != RANKS:
            self.switch_mode(RANKS)
        self.push_screen(LoadingScreen(Path(row.path).name))
        self._load_rank(row)

    @work(thread=True, exclusive=True, group="load", description="opening the rank",
          exit_on_error=False)
    def _load_rank(self, row: RankRow) -> None:
        from memtui.loading import load_trace

        screen = self.screen

        def progress(fraction: float, message: str) -> None:
            if isinstance(screen, LoadingScreen):
                screen.report_from_thread(fraction, message)

        try:
            trace = load_trace(row.path, progress)
            timeline = Timeline.build(trace, row.device)
        except (CaptureError, KeyError) as exc:
            self.call_from_thread(self._rank_failed, str(exc))
            return
        self.call_from_thread(self._show_rank, row, trace, timeline)

    def worker_failed(self, worker) -> None:
        """A worker failed (``report_worker`` said why in a toast): nothing waits for it.
        The stream stops (the Ranks screen says so instead of "loading…"); a rank that
        failed to open leaves its loading screen."""
        if worker.group == "ranks":
            self.stream_error = f"{type(worker.error).__name__}: {worker.error}"
            self.ranks_version += 1
        elif worker.group == "load" and isinstance(self.screen, LoadingScreen):
            self.pop_screen()
        else:
            super().worker_failed(worker)

    def _rank_failed(self, message: str) -> None:
        if isinstance(self.screen, LoadingScreen):
            self.pop_screen()
        self.notify(message, title="cannot open this rank", severity="error", timeout=10)

    async def _show_rank(self, row: RankRow, trace: MemoryTrace, timeline: Timeline) -> None:
        if isinstance(self.screen, LoadingScreen):
            self.pop_screen()
        # The screens of the rank open before hold its widgets: start them afresh.
        for name, screen in SCREENS.items():
            await self.remove_mode(name)
            self.add_mode(name, screen)
        self._forget_trace()
        self._timelines[row.device] = timeline
        self.open_row = row
        self.trace = trace
        self._start(trace)
        if self.cursor is not None and self.cursor.device != row.device:
            self.move_cursor(device=row.device)
        self.sub_title = f"rank {row.rank if row.rank is not None else '?'}  " \
                         f"{Path(row.path).name}"

    def _forget_trace(self) -> None:
        """Drop the analyses cached for the rank open before (the new one replaces it)."""
        self._timelines = {}
        self._live = {}
        self._tops = None
        self.block_filter = None
        self.findings = None  # the new rank's are found after its first paint
        self._findings_started = False
        self.cursor = None

    # -- keys ---------------------------------------------------------------------------

    def action_show_ranks(self) -> None:
        if self.current_mode != RANKS:
            self.switch_mode(RANKS)

    def _has_cursor(self, quiet: bool = False) -> bool:
        """The cursor keys (``p``, ``z``, ``[``...) act on the open rank's screens only:
        on the Ranks screen that rank is hidden, so they say how to see it instead."""
        if self.cursor is None:
            return False
        if self.current_mode == RANKS:
            if not quiet:
                self.notify("The Ranks screen has no cursor: Enter opens the highlighted rank, "
                            "1-6 show the rank open now.", timeout=4)
            return False
        return True

    def action_show_screen(self, name: str) -> None:
        if self.cursor is None:
            self.notify("Open a rank first (Enter on the Ranks screen).", timeout=3)
            return
        if self.current_mode != name:
            self.switch_mode(name)

    def action_device(self) -> None:
        """``d``: pick another rank and device (every row of the Ranks screen)."""
        rows = self.rank_table.rows
        if not rows:
            self.notify("No rank has loaded yet.", timeout=3)
            return
        choices = [(str(i), self._rank_label(row)) for i, row in enumerate(rows)]
        current = next((str(i) for i, row in enumerate(rows)
                        if self.open_row is not None and self.cursor is not None
                        and row.path == self.open_row.path
                        and row.device == self.cursor.device), "0")
        self.push_screen(DeviceScreen(choices, current), self._rank_picked)

    @staticmethod
    def _rank_label(row: RankRow) -> str:
        rank = "-" if row.rank is None else str(row.rank)
        flag = "  ! outlier" if row.outlier else ""
        return (f"rank {rank:>3}  {row.device}  peak {format_bytes(row.peak_allocated)}  "
                f"{Path(row.path).name}{flag}")

    def _rank_picked(self, choice: str | None) -> None:
        if choice is not None:
            self.open_rank(self.rank_table.rows[int(choice)])


def run_ranks_app(discovery: Discovery, cluster: str | None = None,
                  workers: int | None = None, connect_timeout: float = 5.0) -> int:
    """Open several ranks in the UI; the exit status (2 where none could be read)."""
    import sys

    from memtui.rankload import prepare_processes

    prepare_processes()
    app = RanksApp(discovery, cluster=cluster, workers=workers,
                   connect_timeout=connect_timeout)
    code = app.run()
    if app.load_error:
        print(f"memtui: {app.load_error}", file=sys.stderr)
        return 2
    return int(code or 0)


__all__ = ["RANKS", "RanksApp", "run_ranks_app"]
