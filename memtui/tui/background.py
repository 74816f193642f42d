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
from memtui.tui.answer import evidence_changes, finding_note, top_finding
from memtui.tui.exits import closing
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
        first paint starts the background work (:meth:`_start_background`; a preview's
        waits for the whole capture) and lets a new cache entry be written
        (``first_paint``)."""
        self.painted.setdefault(name, time.perf_counter())
        self.first_paint.set()
        if self.preview is None:
            self._start_background()

    def _start_background(self) -> None:
        """Start, once, the findings worker, the check of the keymap's ids and the other
        screens' indexes."""
        if self._findings_started or self.trace is None:
            return
        self._findings_started = True
        self._find()
        if self.keymap_ids:
            self._check_keymap_ids(frozenset(self.keymap_ids))
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

    # -- the keymap's ids (after the first paint, in a thread) -----------------------------

    @work(thread=True, exclusive=True, group="keymap", description="checking the keymap",
          exit_on_error=False)
    def _check_keymap_ids(self, ids: frozenset[str]) -> None:
        """Say once which ids of the user's keymap no binding has (knowing every id imports
        every screen, hence here and not before the first paint)."""
        from memtui.tui.keymap import binding_defaults, keymap_path, unknown_ids

        problem = unknown_ids(dict.fromkeys(ids, ""), set(binding_defaults(type(self))))
        if problem:
            where = self.keymap_file or keymap_path()
            self.call_from_thread(self.add_warning, f"{where}: {problem}")

    # -- findings (after the first paint, in a thread) --------------------------------------

    @work(thread=True, exclusive=True, group="findings", description="the findings",
          exit_on_error=False)
    def _find(self) -> None:
        from memtui.analysis.findings import find_all
        from memtui.loading import findings_of

        trace = self.trace
        self.findings_error = None
        # a finder bug: report_worker says so, worker_failed shows it.  A capture opened
        # again takes the findings kept beside its cache entry (none while followed).
        found = find_all(trace) if self.follow is not None else findings_of(trace)
        self.call_from_thread(self._findings_ready, trace, found)

    @property
    def shutting_down(self) -> bool:
        """The app was asked to exit (q) or is closing (:func:`memtui.tui.exits.closing`)."""
        return closing(self)

    def _findings_ready(self, trace: MemoryTrace, found: dict) -> None:
        if trace is not self.trace:  # replaced meanwhile (--follow): its own worker runs
            return
        if self.shutting_down:  # q pressed while the findings worked: no screen to switch
            return
        self.findings = found
        high = any(f.severity == "high" for items in found.values() for f in items)
        # untouched: not moved, no key pressed, and nothing opened over the Trend (the
        # help, say: a switch would hide it, and its keys would go to the Findings screen)
        untouched = (self.cursor == self._first_cursor and self.current_mode == "trend"
                     and len(self.screen_stack) == 1 and not self.user_acted)
        if untouched and self.open_at_answer:
            self._go_to_answer(found)
        if high and self.findings_first and untouched:
            self.switch_mode("findings")

    def _go_to_answer(self, found: dict) -> None:
        """The cursor, still where the capture opened, to the top finding's evidence
        (tui/answer.py); the status bar says so."""
        top = top_finding(found, self.cursor.device)
        if top is None:
            return
        try:
            self.move_cursor(**evidence_changes(self.trace, top, self.cursor))
        except (KeyError, ValueError):  # evidence outside the device's events
            return
        self._first_cursor = self.cursor
        self.cursor_note = finding_note(top, self.cursor)


__all__ = ["BackgroundWork"]
