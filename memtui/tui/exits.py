"""How the app ends and fails: a failed worker said in one toast, an unhandled exception
kept with its traceback in a file, and the exit status and the one line on stderr
(0 for a clean quit, 2 for a capture that cannot be read, 1 for any crash).

:class:`CrashHandling` is a part of :class:`~memtui.tui.app.MemtuiApp` (a mixin): it sets
``self.crash`` and ``self.crash_log``; :func:`run_to_exit` runs an app (a MemtuiApp, or
one built on it) and reads them.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from pathlib import Path

from textual.app import App
from textual.worker import Worker, WorkerState

from memtui.errors import printable

EXIT_CRASH = 1
EXIT_BAD_INPUT = 2


class CrashHandling:
    """See the module docstring."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        self.report_worker(event)

    def report_worker(self, event: Worker.StateChanged) -> None:
        """Every worker that fails ends here (the app's own, and the screens' through
        their ``on_worker_state_changed``: the message does not bubble): one clear message
        in the UI (what failed and why, where the traceback went), and the screen that
        started it is told (``worker_failed``) so that nothing waits for it."""
        worker = event.worker
        if event.state != WorkerState.ERROR:
            return
        error = worker.error
        log = _write_crash_log(error) if isinstance(error, BaseException) else None
        what = worker.description or worker.group or worker.name or "background work"
        where = f"; details in {log}" if log else ""
        self.notify(f"{what} failed: {type(error).__name__}: {error}{where}",
                    title="error", severity="error", timeout=20)
        failed = getattr(worker.node, "worker_failed", None)
        if failed is not None:
            failed(worker)
    # -- crashes --------------------------------------------------------------------------

    def _handle_exception(self, error: Exception) -> None:
        """Any unhandled exception: keep it and its traceback (in a file), then exit 1."""
        if self.crash is None:
            self.crash = error
            self.crash_log = _write_crash_log(error)
        super()._handle_exception(error)

    def _fatal_error(self) -> None:
        """Exit without printing Textual's full traceback: run_app says one line."""
        self.bell()
        self._close_messages_no_wait()


def _write_crash_log(error: BaseException) -> Path | None:
    """The traceback of ``error`` in a temporary file (None where none can be written)."""
    try:
        handle, name = tempfile.mkstemp(prefix="memtui-crash-", suffix=".txt")
        with os.fdopen(handle, "w", encoding="utf-8", errors="replace") as log:
            log.write("".join(traceback.format_exception(error)))
        return Path(name)
    except OSError:
        return None


def closing(app: App) -> bool:
    """The app was asked to exit (q) or is closing: a worker's late result must not change
    the screens any more (a mode switched during the close broke Textual's shutdown), and a
    screen mounted meanwhile (a mode switched just before q) skips its own mount, resume and
    resize handlers (:mod:`memtui.tui.textual_fixes`): its widgets are being removed."""
    return bool(app._exit or app._closing or app._closed or not app.is_running)


def crash_line(app: App) -> str:
    """The one line said on stderr after a crash."""
    error = app.crash
    what = printable(f"{type(error).__name__}: {error}") if error is not None else "unknown"
    where = f"; the traceback is in {app.crash_log}" if app.crash_log else ""
    return f"memtui: internal error ({what[:200]}){where}"


def exit_status(app: App) -> int:
    """0 only for a clean quit: 2 for a capture that cannot be read, 1 for any crash."""
    if app.load_error:
        return EXIT_BAD_INPUT
    if app.crash is not None or app.return_code not in (None, 0):
        return EXIT_CRASH
    return 0


def run_to_exit(app: App) -> int:
    """Run ``app`` and say how it ended: the one-line error of a capture that could not be
    read, or of a crash, on stderr; the exit status (see :func:`exit_status`)."""
    try:
        app.run()
    except Exception as error:  # raised outside Textual's own handling
        app.crash = app.crash or error
        app.crash_log = app.crash_log or _write_crash_log(error)
    finally:
        if app.follow is not None:
            app.follow.stop()
    status = exit_status(app)
    if app.load_error:
        print(f"memtui: {app.load_error}", file=sys.stderr)
    elif status == EXIT_CRASH:
        print(crash_line(app), file=sys.stderr)
    if app.loading:  # quit while the loader thread reads: do not wait for it
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status


__all__ = ["EXIT_BAD_INPUT", "EXIT_CRASH", "CrashHandling", "closing", "crash_line",
           "exit_status", "run_to_exit"]
