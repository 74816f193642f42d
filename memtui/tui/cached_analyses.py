"""The analyses every screen shares, built once per trace and kept by the app: the
timeline of each device, the label of each call stack (under the ``T`` rule) and the
blocks alive at a time.

:class:`CachedAnalyses` is a part of :class:`~memtui.tui.app.MemtuiApp` (a mixin): it
reads ``self.trace`` and ``self.top_rule`` and keeps ``self._timelines``, ``self._live``,
``self._tops`` (set up by the app, cleared when the trace is replaced) and ``self._top_names``
(the names of ``self._tops`` as a dict, made again whenever ``self._tops`` is another frame).
"""

from __future__ import annotations

import polars as pl

from memtui.analysis.stacks.callstack import TOP_RULES, stack_tops, top_names
from memtui.analysis.timeline.at_time import LiveBlocks, Timeline, block_positions


class CachedAnalyses:
    """See the module docstring."""

    def timeline(self, device: str) -> Timeline:
        if device not in self._timelines:
            self._timelines[device] = Timeline.build(self.trace, device)
        return self._timelines[device]

    def stack_tops(self) -> pl.DataFrame:
        """stack_id -> ``top``, the label of the frame that names the stack under the
        current ``top_rule``."""
        if self._tops is None:
            self._tops = stack_tops(self.trace, self.top_rule)
        return self._tops

    def stack_top_names(self) -> dict[int, str]:
        """:meth:`stack_tops` as a dict (a key's lookup, never a query that could wait
        behind a background analysis on polars' threads)."""
        tops = self.stack_tops()
        names = getattr(self, "_top_names", None)
        if names is None or names[0] is not tops:
            names = self._top_names = (tops, top_names(tops))
        return names[1]

    def watch_top_rule(self) -> None:
        self._tops = None
        self._live.clear()

    def action_stack_top(self) -> None:
        """Cycle the frame that names a stack: innermost user frame, outermost user frame,
        innermost frame."""
        rules = list(TOP_RULES)
        self.top_rule = rules[(rules.index(self.top_rule) + 1) % len(rules)]
        self.notify(f"Stacks are named by their {TOP_RULES[self.top_rule]} (T: change)")

    def live_blocks(self, device: str) -> LiveBlocks:
        if device not in self._live:
            self._live[device] = LiveBlocks(self.trace.device_blocks(device), self.stack_tops(),
                                            block_positions(self.trace, device))
        return self._live[device]


__all__ = ["CachedAnalyses"]
