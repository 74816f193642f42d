"""How a long open says how far it is: phase by phase, with counts and rates.

A source, the loader and the findings report through a ``progress(fraction, message)``
callback (the UI's loading screen takes one).  :class:`Phases` makes the messages: each
phase (reading rows, decoding, pairing, levels, findings...) fills its share of the bar
and says how many rows (or bytes) it has done, of how many, and how fast::

    reading rows: 3.2M of 10.0M rows · 1.4M rows/s

A report at ``fraction`` 1.0 says the whole operation (an open, the findings) is over.

The commands have no screen: :class:`StderrProgress` writes the same messages to stderr,
one line rewritten in place where stderr is a terminal (erased when the operation is over,
before the command prints anything, so output and a one-line error stay as they were),
or, with ``MEMTUI_PROGRESS=1`` (a log, a CI job), one line per finished phase.  The CLI
makes it the process's default (:func:`set_default`), which
:func:`memtui.loading.load_trace` and the findings use where their caller passes none.
Light on purpose: nothing here imports polars or the model.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

Progress = Callable[[float, str], None]

#: ``1``: report on stderr even where it is not a terminal; ``0``: never.
PROGRESS_ENV = "MEMTUI_PROGRESS"
_THROTTLE_S = 0.25  # a terminal line is rewritten at most this often

_default: Progress | None = None


def set_default(progress: Progress | None) -> None:
    """The callback an open uses where its caller passes none (the CLI's stderr lines)."""
    global _default
    _default = progress


def default() -> Progress | None:
    return _default


def counted(value: float, unit: str = "") -> str:
    """``value`` short: ``950``, ``12.3K``, ``3.2M``, ``1.1G`` (then the unit)."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= size:
            text = f"{value / size:.1f}{suffix}"
            break
    else:
        text = f"{value:.0f}"
    return f"{text} {unit}".rstrip()


class Phase:
    """One phase of :class:`Phases`: :meth:`update` with the count done so far."""

    def __init__(self, phases: Phases, name: str, total: float | None, unit: str,
                 low: float, high: float) -> None:
        self.phases, self.name, self.total, self.unit = phases, name, total, unit
        self.low, self.high = low, high
        self.started = phases.clock()
        self.done = 0.0

    def message(self) -> str:
        """``name: done of total unit · rate unit/s`` (the parts known so far; at the
        start, the total alone)."""
        if not self.done:
            return self.name if self.total is None else \
                f"{self.name}: {counted(self.total, self.unit)}"
        amount = counted(self.done)
        if self.total is not None and self.total != self.done:
            amount += f" of {counted(self.total)}"
        text = f"{self.name}: {amount} {self.unit}"
        elapsed = self.phases.clock() - self.started
        if elapsed > 0 and self.done:
            text += f" · {counted(self.done / elapsed, self.unit)}/s"
        return text

    def update(self, done: float) -> None:
        self.done = done
        share = min(done / self.total, 1.0) if self.total else 0.0
        self.phases.report(self.low + (self.high - self.low) * share, self.message())

    def finish(self, done: float | None = None) -> None:
        """The phase is over: ``done`` its final count (default: the total)."""
        self.done = done if done is not None else (self.total or self.done)
        self.total = self.done
        self.phases.report(self.high, self.message())


class Phases:
    """Phases of one open, each a share ``(low, high)`` of the bar; ``progress`` None
    reports nothing (every call still costs almost nothing)."""

    def __init__(self, progress: Progress | None, clock: Callable[[], float] = time.monotonic):
        self.progress, self.clock = progress, clock

    def start(self, name: str, share: tuple[float, float], total: float | None = None,
              unit: str = "rows") -> Phase:
        phase = Phase(self, name, total, unit, *share)
        self.report(share[0], phase.message())
        return phase

    def report(self, fraction: float, message: str) -> None:
        if self.progress is not None:
            self.progress(fraction, message)


class StderrProgress:
    """A ``progress`` callback that writes to ``stream`` (stderr): on a terminal one line
    rewritten in place (at most every quarter second), erased when the operation is over
    (``fraction`` 1.0) or at :meth:`close`; elsewhere one line per phase, written when the
    next begins or the operation is over."""

    def __init__(self, stream: TextIO | None = None, live: bool | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.clock = clock
        self._last_write = -1e9
        self._shown = False
        self._pending: str | None = None  # (not live) the current phase's last message
        self._lock = threading.Lock()  # (sources report from worker threads too)

    def __call__(self, fraction: float, message: str) -> None:
        message = _one_line(message)
        with self._lock:
            if fraction >= 1.0:  # over: the live line goes, a phase's line is written
                self._end()
                return
            if self.live:
                now = self.clock()
                if now - self._last_write < _THROTTLE_S and fraction < 1.0:
                    return
                self._last_write = now
                self._write(f"\r\x1b[Kmemtui: {message} [{fraction:4.0%}]")
                self._shown = True
                return
            if self._pending is not None and _phase(self._pending) != _phase(message):
                self._write(f"memtui: {self._pending}\n")
            self._pending = message

    def close(self) -> None:
        """End the report: the live line erased, or the last phase's line written."""
        with self._lock:
            self._end()

    def _end(self) -> None:
        if self.live and self._shown:
            self._write("\r\x1b[K")
            self._shown = False
        elif not self.live and self._pending is not None:
            self._write(f"memtui: {self._pending}\n")
            self._pending = None

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stderr: the report just stops
            self.live, self._pending = False, None


def _phase(message: str) -> str:
    return message.split(":", 1)[0]


def _one_line(message: str) -> str:
    """A message as one line of plain text (a file's name in it may hold anything)."""
    from memtui.errors import printable

    return printable(message.replace("\n", " ").replace("\r", " "))


def stderr_progress() -> StderrProgress | None:
    """The commands' report on stderr: live where stderr is a terminal, one line per phase
    under ``MEMTUI_PROGRESS=1`` elsewhere, none under ``MEMTUI_PROGRESS=0`` or where stderr
    is neither."""
    setting = os.environ.get(PROGRESS_ENV, "").strip()
    try:
        terminal = sys.stderr is not None and sys.stderr.isatty()
    except (OSError, ValueError):
        terminal = False
    if setting == "0" or not (terminal or setting == "1"):
        return None
    return StderrProgress(live=terminal)
