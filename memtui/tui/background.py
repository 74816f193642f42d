"""What the app computes after the first paint, in threads: the findings (shown on the
Findings screen, which opens by itself for one of high severity while the user has not
moved) and the other screens' indexes (warmed up so a first visit does not index).

:class:`BackgroundWork` is a part of :class:`~memtui.tui.app.MemtuiApp` (a mixin): it
reads ``self.trace`` and ``self.cursor`` and sets ``self.findings`` and
``self.findings_error``.
"""

from __future__ import annotations

import time

from textual import work
from textual.worker import Worker

from memtui.model import MemoryTrace
from memtui.tui.screens import SCREENS


class BackgroundWork:
    """See the module docstring."""

    def worker_failed(self, worker: Worker) -> None:
        """One of the app's own workers failed (``report_worker`` said why in a toast):
        the findings say so on the Findings screen instead of waiting for ever."""
        if worker.group == "findings":
            self.findings_error = f"{type(worker.error).__name__}: {worker.error}"
            self.findings = {}
    def mark_painted(self, name: str) -> None:
        """Screens call this after their first paint (benchmarks read ``painted``); the
        first paint starts the findings worker."""
        self.painted.setdefault(name, time.perf_counter())
        if not self._findings_started and self.trace is not None:
            self._findings_started = True
            self._find()
            from memtui.tui.screens import linked

            if self.cursor is not None and self.trace.blocks.height > linked.BACKGROUND_BLOCKS:
                self._warm_up(self.trace, self.cursor.device)

    # -- the other screens' indexes (after the first paint, in a thread) ----------------------

    @work(thread=True, exclusive=True, group="warm", description="indexing the screens",
          exit_on_error=False)
    def _warm_up(self, trace: MemoryTrace, device: str) -> None:
        """Build what the Blocks, Pool and Stacks screens need for ``device`` before they are
        visited (into the shared analysis cache: a screen asking meanwhile waits for the
        build under way instead of starting its own), so a first visit does not index."""
        from textual.worker import get_current_worker

        from memtui.loading import keep_block_map

        worker = get_current_worker()
        for screen_class in SCREENS.values():
            warm = getattr(screen_class, "warm", None)
            if warm is None:
                continue
            if worker.is_cancelled or trace is not self.trace:  # quitting, or replaced
                return
            try:
                warm(trace, device)
            except Exception:  # noqa: BLE001 - the screen builds (and reports) it on a visit
                continue
        if self.follow is None and not worker.is_cancelled:
            keep_block_map(trace, device)  # for the next open (unless it came from there)

    # -- findings (after the first paint, in a thread) --------------------------------------

    @work(thread=True, exclusive=True, group="findings", description="the findings",
          exit_on_error=False)
    def _find(self) -> None:
        from memtui.analysis.findings import find_all

        trace = self.trace
        self.findings_error = None
        found = find_all(trace)  # a finder bug: report_worker says so, worker_failed shows it
        self.call_from_thread(self._findings_ready, trace, found)

    def _findings_ready(self, trace: MemoryTrace, found: dict) -> None:
        if trace is not self.trace:  # replaced meanwhile (--follow): its own worker runs
            return
        self.findings = found
        high = any(f.severity == "high" for items in found.values() for f in items)
        untouched = self.cursor == self._first_cursor and self.current_mode == "trend"
        if high and self.findings_first and untouched:
            self.switch_mode("findings")


__all__ = ["BackgroundWork"]
