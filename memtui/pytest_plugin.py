"""The pytest plugin (``pytest11`` entry point ``memtui``): accelerator memory limits on tests.

::

    @pytest.mark.accelerator_memory(max_peak="2 GiB", max_leak_per_step="0 B")
    def test_train_step():
        ...

A marked test runs with the accelerator's memory history recorded (memtui's own recorder,
:mod:`memtui.record`: CUDA through ``torch.cuda.memory``, Ascend through ``torch_npu``);
the capture is written under the test's ``tmp_path`` and checked with the same code as
``memtui check`` (:meth:`memtui.Capture.check`).  A broken limit fails the test with the
verdict's text and the capture's path (open it with ``memtui PATH``); the path is also a
``user_properties`` entry (``accelerator_memory_capture``), which JUnit XML carries.
Without torch or without an accelerator the test is skipped, saying why.

The marker takes the limits of ``memtui check``: ``max_peak``, ``max_reserved``,
``max_end``, ``max_leak_per_step``, ``tolerance``, ``allow_oom``, and ``baseline`` (a
capture file to compare against, relative to pytest's rootdir).  The recorder is the fixture
``accelerator_memory_recorder``, a factory ``folder -> recorder`` (``start()``,
``stop() -> Path``); a conftest may override it (the tests do, with a fake that writes
known snapshots).

Importing this module (pytest does at start-up for every session) imports neither torch
nor polars: they load when a marked test runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

MARKER = "accelerator_memory"
CAPTURE_PROPERTY = "accelerator_memory_capture"
#: History entries kept by the real recorder (the allocator's ring buffer).
MAX_ENTRIES = 1_000_000


class MemoryRecorder(Protocol):
    """What ``accelerator_memory_recorder(folder)`` returns."""

    def start(self) -> None: ...

    def stop(self) -> Path:
        """Stop recording; the capture written (a snapshot pickle) under the folder."""
        ...


class TorchRecorder:
    """memtui's recorder (:class:`memtui.record.Recorder`) around one test: history on at
    ``start``, one snapshot dumped at ``stop``."""

    def __init__(self, folder: Path, backend: Any) -> None:
        self.folder = folder
        self.backend = backend
        self._recorder: Any = None

    def start(self) -> None:
        from memtui.record.recorder import Recorder, Settings

        # No interval dumps, no OOM observer (torch has no way to detach one: it would
        # outlive the test); the dump at stop holds the whole history, OOMs included.
        settings = Settings(out=str(self.folder), every=None, on_oom=False,
                            max_entries=MAX_ENTRIES, keep=1)
        self._recorder = Recorder(settings, self.backend)
        self._recorder.start()

    def stop(self) -> Path:
        recorder = self._recorder
        recorder.stop()
        if not recorder.dumps:
            raise RuntimeError(f"no snapshot could be written into {self.folder}")
        return recorder.dumps[-1]


def torch_recorder(folder: Path) -> TorchRecorder:
    """The real recorder, or a skip saying why there is nothing to record."""
    from memtui.record.recorder import find_backend, load_torch

    missing = load_torch()  # (memtui.record is the only code that imports torch)
    if missing:
        pytest.skip(f"accelerator_memory: {missing}")

    backend, why = find_backend()
    if backend is None:
        pytest.skip(f"accelerator_memory: no accelerator to record ({why})")
    return TorchRecorder(folder, backend)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(max_peak=None, max_reserved=None, max_end=None, max_leak_per_step=None, "
        "baseline=None, tolerance=5, allow_oom=False): record the accelerator's memory "
        "around the test (memtui) and fail it where a limit is broken; skipped without "
        "an accelerator")


@pytest.fixture
def accelerator_memory_recorder():
    """The factory ``folder -> recorder`` the marker records with (override to fake it)."""
    return torch_recorder


@dataclass
class _Run:
    """One marked test's recording: its recorder, limits, baseline and folder."""

    recorder: MemoryRecorder
    limits: dict[str, Any]
    baseline: str | None
    folder: Path
    capture: Path | None = None
    running: bool = False

    def start(self) -> None:
        self.recorder.start()
        self.running = True

    def stop(self) -> Path:
        self.running = False
        self.capture = self.recorder.stop()
        return self.capture


_RUN = pytest.StashKey[_Run]()


def _limits(marker: pytest.Mark) -> tuple[dict[str, Any], str | None]:
    if marker.args:
        raise pytest.UsageError(f"@pytest.mark.{MARKER} takes keywords only "
                                "(max_peak=..., max_leak_per_step=...)")
    values = dict(marker.kwargs)
    baseline = values.pop("baseline", None)
    from memtui.analysis.limits.check import Limits

    try:
        Limits.from_mapping(values)
    except ValueError as exc:
        raise pytest.UsageError(f"@pytest.mark.{MARKER}: {exc}") from None
    return values, None if baseline is None else str(baseline)


@pytest.fixture(autouse=True)
def _accelerator_memory(request: pytest.FixtureRequest):
    """For a marked test: the recorder made ready (or the skip); the recording itself
    wraps the test's call (:func:`pytest_runtest_call`)."""
    marker = request.node.get_closest_marker(MARKER)
    if marker is None:
        yield
        return
    limits, baseline = _limits(marker)
    if baseline is not None and not Path(baseline).is_absolute():
        baseline = str(request.config.rootpath / baseline)
    folder = request.getfixturevalue("tmp_path") / "accelerator_memory"
    folder.mkdir(parents=True, exist_ok=True)
    factory = request.getfixturevalue("accelerator_memory_recorder")
    run = _Run(factory(folder), limits, baseline, folder)
    request.node.stash[_RUN] = run
    yield
    if run.running:  # the call never reached its end (an error in another hook)
        run.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    run = item.stash.get(_RUN, None)
    if run is None:
        return (yield)
    run.start()
    try:
        result = yield
    except BaseException as exc:
        capture = run.stop()
        item.user_properties.append((CAPTURE_PROPERTY, str(capture)))
        exc.add_note(f"accelerator memory capture: {capture} (open it: memtui {capture})")
        raise
    capture = run.stop()
    item.user_properties.append((CAPTURE_PROPERTY, str(capture)))
    _check(run, capture)
    return result


def _check(run: _Run, capture: Path) -> None:
    """Fail the test (its verdict and the capture's path) where a limit is broken."""
    from memtui.api import open as open_capture
    from memtui.errors import CaptureError

    where = f"capture kept at {capture} (open it: memtui {capture})"
    try:
        baseline = open_capture(run.baseline, use_cache=False) if run.baseline else None
        result = open_capture(capture, use_cache=False).check(baseline, limits=run.limits)
    except CaptureError as exc:
        pytest.fail(f"accelerator_memory: memtui: {exc}\n{where}", pytrace=False)
    if not result.passed:
        pytest.fail(f"{result.text()}\n{where}", pytrace=False)
