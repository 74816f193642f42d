"""Loading many ranks: each rank's rows computed away from the caller, streamed back.

One rank is one capture (see :mod:`memtui.sources.ranks`).  :func:`summarize_capture`
loads it, computes its :class:`~memtui.analysis.across.ranks.RankRow` per device and its
``summary`` entries, and returns only those (a few KB), so that the process asking never
holds more than the small per-rank results.  :func:`stream_results` runs it for every
capture and yields the results as they finish, in one of three ways:

* ``"serial"``: in this process, one rank after the other;
* ``"pool"`` (default): a pool of processes sized to the cores (``spawn``: no fork of a
  process that already runs polars threads);
* ``"dask"``: on a Dask distributed cluster (the ``cluster`` extra), at an existing
  scheduler's address, or on a ``LocalCluster`` started here for ``"local"``.  Workers
  read the files from the (shared) filesystem and send back only the results.

A capture that cannot be read yields a result with ``error`` set (the one-line message)
and no rows: the caller skips it with a warning and shows the rest.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from memtui.analysis.across.ranks import CURVE_POINTS, RankRow, flag_outliers, rank_rows, sort_rows
from memtui.errors import CaptureError
from memtui.sources.ranks import RankCapture

#: ``--cluster`` value that starts a Dask LocalCluster here.
LOCAL_CLUSTER = "local"
#: How often a waiting stream checks whether it was asked to stop (seconds).
POLL_S = 0.2
CLUSTER_HINT = "needs the cluster extra: pip install 'memtui[cluster]' (dask[distributed])"
#: Seconds to wait for a Dask scheduler to answer (``--connect-timeout``).
DEFAULT_CONNECT_TIMEOUT = 5.0


@dataclass
class RankResult:
    """What one rank sends back: its rows and summary entries, or why it could not."""

    capture: RankCapture
    rows: list[RankRow] = field(default_factory=list)
    devices: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    source: str = ""
    error: str | None = None


def summarize_capture(capture: RankCapture, points: int = CURVE_POINTS) -> RankResult:
    """Load one capture and return its rows (runs in a worker process or on a cluster)."""
    from memtui.analysis.findings import find_all
    from memtui.analysis.summary import summary
    from memtui.analysis.timeline.layers import has_layers, layer_view
    from memtui.loading import load_trace

    try:
        trace = load_trace(capture.path)
    except CaptureError as exc:
        return RankResult(capture, error=str(exc))
    if has_layers(trace) and "layers" not in trace.meta.extra:
        trace = layer_view(trace)  # each device's default memory layer, as summary takes it
    findings = find_all(trace, what_if=False)  # counts and figures: no advice shown
    rows = rank_rows(trace, str(capture.path), capture.rank, points, findings)
    data = summary(trace, findings)
    ranks = {row.device: row.rank for row in rows}
    devices = [{**entry, "rank": ranks.get(entry["device"]), "path": str(capture.path)}
               for entry in data["devices"]]
    warnings = [f"{capture.path}: {warning}" for warning in data["warnings"]]
    return RankResult(capture, rows=rows, devices=devices, warnings=warnings,
                      source=trace.meta.source)


class RankTable:
    """The results gathered so far: rows with outliers flagged, devices, warnings.

    ``add`` takes results in any order; ``rows`` stays in rank order and is re-flagged on
    every addition (the median moves as ranks arrive).
    """

    def __init__(self, expected: int = 0) -> None:
        self.expected = expected
        self.done = 0
        self.rows: list[RankRow] = []
        self.devices: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self.errors: list[str] = []
        self.sources: set[str] = set()

    def add(self, result: RankResult) -> None:
        self.done += 1
        if result.error is not None:
            self.errors.append(result.error)
            self.warnings.append(f"skipped {result.error}")
            return
        self.sources.add(result.source)
        self.warnings.extend(result.warnings)
        self.devices.extend(result.devices)
        self.devices.sort(key=_device_order)
        self.rows = flag_outliers(sort_rows([*self.rows, *result.rows]))

    @property
    def source(self) -> str:
        """The one source every rank came from, or ``"mixed"``."""
        return next(iter(self.sources)) if len(self.sources) == 1 else "mixed"

    def progress(self) -> str:
        return f"{self.done}/{self.expected} ranks"

    def as_json(self, path: str) -> dict[str, Any]:
        """The ``summary --json`` object: the usual keys plus ``ranks``."""
        return {"source": self.source, "path": path, "devices": list(self.devices),
                "ranks": [row.as_json() for row in self.rows],
                "warnings": list(self.warnings)}


def _device_order(entry: dict[str, Any]) -> tuple:
    rank = entry.get("rank")
    return (rank is None, rank or 0, entry.get("path", ""), entry["device"])


def cores() -> int:
    """The cores this process may run on."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def stream_results(captures: Sequence[RankCapture], how: str = "pool",
                   cluster: str | None = None, workers: int | None = None,
                   points: int = CURVE_POINTS,
                   stop: threading.Event | None = None,
                   connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> Iterator[RankResult]:
    """Every capture's :class:`RankResult`, as each finishes.

    ``how`` is ``"serial"``, ``"pool"`` or ``"dask"`` (``cluster`` given: the scheduler's
    address, or ``"local"``).  ``workers`` caps the pool or the LocalCluster (default: the
    cores).  Setting ``stop`` (from another thread), or closing the generator, ends the
    stream within :data:`POLL_S` and drops the work not yet started.  A scheduler that has
    not answered within ``connect_timeout`` seconds is a one-line :class:`CaptureError`.
    """
    stop = stop or threading.Event()
    if cluster is not None:
        how = "dask"
    if how == "dask":
        yield from _dask_results(captures, cluster or LOCAL_CLUSTER, workers, points, stop,
                                 connect_timeout)
    elif how == "pool" and len(captures) > 1 and min(workers or cores(), len(captures)) > 1:
        yield from _pool_results(captures, min(workers or cores(), len(captures)), points,
                                 stop)
    else:
        for capture in captures:
            if stop.is_set():
                return
            yield summarize_capture(capture, points)


def _pool_results(captures: Sequence[RankCapture], workers: int, points: int,
                  stop: threading.Event,
                  work: Callable[..., RankResult] = summarize_capture) -> Iterator[RankResult]:
    """The pool's results.  A worker that dies (the kernel's OOM killer) breaks the whole
    pool and every rank still in it: those go round once more in a fresh pool, and what
    breaks that one too runs alone, one rank per process, so that only the rank whose
    process dies is reported lost (a result with ``error``), never the others."""
    lost: list[RankCapture] = []
    yield from _one_pool(captures, workers, points, stop, lost, work)
    if lost and not stop.is_set():
        again: list[RankCapture] = []
        yield from _one_pool(lost, min(workers, len(lost)), points, stop, again, work)
        for capture in again:
            if stop.is_set():
                return
            alone: list[RankCapture] = []
            yield from _one_pool([capture], 1, points, stop, alone, work)
            if alone:
                yield RankResult(capture, error=f"{capture.path}: {LOST}")


#: Why a rank whose worker process died has no figures.
LOST = ("its worker process died while reading it (killed: out of memory?); "
        "the other ranks are shown")


def _one_pool(captures: Sequence[RankCapture], workers: int, points: int,
              stop: threading.Event, lost: list[RankCapture],
              work: Callable[..., RankResult]) -> Iterator[RankResult]:
    """Results of one process pool; the captures it lost to a broken pool go to ``lost``."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    pool = ProcessPoolExecutor(max_workers=workers,
                               mp_context=multiprocessing.get_context("spawn"))
    pending: set = set()
    try:
        futures = {pool.submit(work, capture, points): capture
                   for capture in captures}
        pending = set(futures)
        while pending and not stop.is_set():
            done, pending = wait(pending, timeout=POLL_S, return_when=FIRST_COMPLETED)
            for future in done:
                try:
                    result = future.result()
                except BrokenProcessPool:
                    lost.append(futures[future])
                    continue
                yield result
    finally:
        # Every future done: wait for the pool's own threads, else the interpreter's exit
        # hook writes to a closed pipe and prints a traceback (Python 3.11).  Stopped
        # early: drop what has not started; running ranks finish on their own.
        pool.shutdown(wait=not pending, cancel_futures=True)


def check_connect_timeout(seconds: float) -> float:
    """``--connect-timeout`` as given, or a CaptureError where it is no wait at all (0,
    negative, NaN, infinite): a scheduler is never asked to answer in -1 seconds."""
    import math

    if not isinstance(seconds, int | float) or not math.isfinite(seconds) or seconds <= 0:
        raise CaptureError("--connect-timeout", f"{seconds!r} seconds: say how long to wait "
                                                "for a Dask scheduler, more than 0")
    return float(seconds)


def check_cluster_address(address: str) -> str:
    """``address`` as Dask's client takes it (``HOST:PORT`` gets ``tcp://``), or a
    :class:`CaptureError` saying what a scheduler address looks like."""
    if address == LOCAL_CLUSTER:
        return address
    from urllib.parse import urlsplit

    text = address if "://" in address else f"tcp://{address}"
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        parts, port = None, None
    if parts is not None and parts.scheme == "tls":
        raise CaptureError("--cluster", "tls:// needs certificates memtui cannot pass: reach "
                                        "the scheduler with tcp:// (through an SSH tunnel)")
    if parts is None or parts.scheme != "tcp" or not parts.hostname or port is None or \
            parts.path not in ("", "/"):
        raise CaptureError("--cluster", f"{address!r} is not a Dask scheduler address (say "
                                        "tcp://HOST:PORT, HOST:PORT, or local)")
    return text


def _dask_results(captures: Sequence[RankCapture], address: str, workers: int | None,
                  points: int, stop: threading.Event,
                  connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> Iterator[RankResult]:
    try:
        from distributed import Client, LocalCluster, wait
    except ImportError:
        raise CaptureError("--cluster", CLUSTER_HINT) from None
    address = check_cluster_address(address)
    local = None
    try:
        if address == LOCAL_CLUSTER:
            local = LocalCluster(n_workers=workers or cores(), threads_per_worker=1,
                                 processes=True, dashboard_address=None)
            client = Client(local)
        else:
            client = _connect(Client, address, connect_timeout)
    except CaptureError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever answered there, it is no scheduler
        if local is not None:
            local.close()
        raise CaptureError(address, f"no Dask scheduler answered ({_short(exc)})") from None
    try:
        pending = set(client.map(summarize_capture, list(captures), points=points, pure=False))
        while pending and not stop.is_set():
            try:
                done, pending = wait(list(pending), timeout=POLL_S,
                                     return_when="FIRST_COMPLETED")
            except TimeoutError:
                continue
            for future in done:
                yield future.result()
            pending = set(pending)
    finally:
        client.close()
        if local is not None:
            local.close()


def _connect(client_class: Any, address: str, timeout: float) -> Any:
    """A client of the scheduler at ``address``, giving up after ``timeout`` seconds.

    Dask's own timeout covers the handshake only after a connection: a dead address or a
    server that accepts and closes retries for its whole comm timeout (21 to 59 s seen),
    and a server that speaks another protocol (HTTP) is read as a frame length (exabytes).
    So a plain TCP connect is tried first, and the client is made in a thread we stop
    waiting for after ``timeout``."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(address)
    try:
        socket.create_connection((parts.hostname, parts.port), timeout=timeout).close()
    except OSError as exc:
        raise CaptureError(address, f"no Dask scheduler answered ({_short(exc)})") from None
    outcome: dict[str, Any] = {}

    def connect() -> None:  # a daemon thread: one stuck in Dask never holds the exit up
        try:
            outcome["client"] = client_class(address, timeout=f"{timeout}s")
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            outcome["error"] = exc

    thread = threading.Thread(target=connect, name="memtui-dask-connect", daemon=True)
    thread.start()
    thread.join(timeout + 1)
    if "client" in outcome:
        return outcome["client"]
    if "error" in outcome:
        raise outcome["error"]
    raise CaptureError(address, f"no Dask scheduler answered within {timeout:g} s "
                                "(--connect-timeout)")


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:160] if text else type(exc).__name__


def prepare_processes() -> None:
    """Start multiprocessing's resource tracker now, while ``sys.stderr`` is the real one.

    A full-screen UI replaces ``sys.stderr`` with an object whose ``fileno()`` is not a
    real descriptor; the tracker, started lazily by the first worker process, passes that
    descriptor on and fails (``bad value(s) in fds_to_keep``).  Call this before the UI
    starts when it will start processes (the pool, a Dask LocalCluster).
    """
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()


def dask_available() -> bool:
    """Whether the ``cluster`` extra (dask distributed) is installed."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


__all__ = ["LOCAL_CLUSTER", "RankResult", "RankTable", "check_connect_timeout", "cores",
           "dask_available",
           "prepare_processes", "stream_results", "summarize_capture"]
