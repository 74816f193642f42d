"""The pytest plugin (issue 24): ``@pytest.mark.accelerator_memory`` on tests run by pytester.

The plugin's own logic needs no accelerator: the inner sessions' conftest overrides the
``accelerator_memory_recorder`` fixture with a fake that, at ``stop``, copies a prepared
snapshot (``tests/helpers/compare_traces.py``: peak 6 MiB; with a leak of 1 MiB per step
from ``log_metrics``) into the folder the plugin gave it, and notes its calls in a log so
the test can see the recording wrapped the test's body.  The real recorder's skips are
driven with a fake ``torch`` module (no CUDA) and with none at all.
"""

from __future__ import annotations

import importlib.metadata
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.helpers.compare_traces import MiB, write_loop

pytest_plugins = ["pytester"]

FAKE_RECORDER = """
import shutil
from pathlib import Path

import pytest

LOG = Path({log!r})


class FakeRecorder:
    def __init__(self, folder, source):
        self.folder, self.source = Path(folder), Path(source)

    def start(self):
        with LOG.open("a") as fh:
            fh.write(f"start {{self.folder}}\\n")

    def stop(self):
        with LOG.open("a") as fh:
            fh.write("stop\\n")
        target = self.folder / "snapshot_exit.pickle"
        shutil.copy(self.source, target)
        return target


@pytest.fixture
def accelerator_memory_recorder(request):
    source = {captures!r}[getattr(request.module, "CAPTURE", "clean")]
    return lambda folder: FakeRecorder(folder, source)
"""


#: Plugins of this venv that the inner sessions do without (textual-snapshot's session
#: end removes a folder the outer session still uses).
QUIET = ("-p", "no:cacheprovider", "-p", "no:textual-snapshot", "-p", "no:syrupy",
         "-p", "no:asyncio", "-p", "no:hypothesispytest")


def plugin_args() -> list[str]:
    """``-p memtui.pytest_plugin`` unless memtui's entry point already loads it."""
    points = importlib.metadata.entry_points(group="pytest11")
    if any(p.value == "memtui.pytest_plugin" for p in points):
        return []
    return ["-p", "memtui.pytest_plugin"]


@pytest.fixture(autouse=True)
def this_memtui(monkeypatch):
    """The inner sessions (subprocesses) import this checkout's memtui."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))


@pytest.fixture
def captures(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("captures")
    return {
        "clean": str(write_loop(folder / "clean.pickle", steps=6)),
        "leak": str(write_loop(folder / "leak.pickle", steps=8, leak=MiB)),
        "grown": str(write_loop(folder / "grown.pickle", steps=6, forward=4 * MiB + 629_146)),
    }


@pytest.fixture
def faked(pytester, captures):
    log = pytester.path / "recorder.log"
    pytester.makeconftest(FAKE_RECORDER.format(log=str(log), captures=captures))
    return log


def run(pytester, source: str, *args: str):
    pytester.makepyfile(test_marked=textwrap.dedent(source))
    return pytester.runpytest_subprocess(*plugin_args(), *QUIET, *args)


def test_a_test_within_its_limits_passes_and_the_recording_wraps_it(pytester, faked):
    result = run(pytester, """
        import pytest
        from pathlib import Path

        LOG = Path(__file__).parent / "recorder.log"

        @pytest.mark.accelerator_memory(max_peak="7 MiB", max_leak_per_step="0 B")
        def test_step():
            assert LOG.read_text().startswith("start ")  # recording while the body runs
            assert "stop" not in LOG.read_text()

        def test_unmarked():
            pass
    """)
    result.assert_outcomes(passed=2)
    log = faked.read_text().splitlines()
    assert len(log) == 2 and log[1] == "stop"  # only the marked test was recorded
    assert log[0].endswith("/accelerator_memory")  # under the test's tmp_path


def test_a_broken_limit_fails_with_the_verdict_and_the_kept_capture(pytester, faked):
    result = run(pytester, """
        import pytest

        @pytest.mark.accelerator_memory(max_peak="5 MiB")
        def test_step():
            pass
    """)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*FAIL: *snapshot_exit.pickle: 2 of 3 limits hold, 1 broken*",
        "*max_peak: peak allocated 6.0 MiB > --max-peak 5.0 MiB*",
        "*forward (/home/u/model.py:10)*",
        "*capture kept at *accelerator_memory/snapshot_exit.pickle (open it: memtui *",
    ])
    kept = next(line for line in result.stdout.lines if "capture kept at" in line)
    path = Path(kept.split("capture kept at ")[1].split(" (open it")[0])
    assert path.is_file() and "test_step" in str(path)  # pytest's tmp_path of the test


def test_a_leak_fails_its_limit(pytester, faked):
    result = run(pytester, """
        import pytest

        CAPTURE = "leak"

        @pytest.mark.accelerator_memory(max_leak_per_step="0 B")
        def test_step():
            pass

        @pytest.mark.accelerator_memory(max_leak_per_step="2 MiB")
        def test_step_generous():
            pass
    """)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*leak: log_metrics (train.py:60) leaks 1.0 MiB per step*"])


def test_a_baseline_regression_fails(pytester, faked, captures):
    import shutil

    shutil.copy(captures["clean"], pytester.path / "base.pickle")  # relative to rootdir
    result = run(pytester, """
        import pytest

        CAPTURE = "grown"

        @pytest.mark.accelerator_memory(baseline="base.pickle")
        def test_step():
            pass
    """)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*baseline_peak: peak allocated 6.6 MiB against the "
                                 "baseline's 6.0 MiB (+10.0%, tolerance 5%)*"])


def test_a_test_that_raises_keeps_its_error_and_names_the_capture(pytester, faked):
    result = run(pytester, """
        import pytest

        @pytest.mark.accelerator_memory(max_peak="1 B")
        def test_step():
            raise RuntimeError("CUDA out of memory")
    """)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*RuntimeError: CUDA out of memory*",
                                 "*accelerator memory capture: *snapshot_exit.pickle*"])
    assert "limits hold" not in result.stdout.str()  # the test's own error is the failure


def test_bad_limits_are_a_usage_error(pytester, faked):
    result = run(pytester, """
        import pytest

        @pytest.mark.accelerator_memory(max_peak="lots")
        def test_step():
            pass
    """)
    assert result.ret != 0
    assert "not a size: 'lots'" in result.stdout.str() + result.stderr.str()


def test_the_capture_path_reaches_junit_xml(pytester, faked, tmp_path):
    report = tmp_path / "junit.xml"
    result = run(pytester, """
        import pytest

        @pytest.mark.accelerator_memory(max_peak="7 MiB")
        def test_step():
            pass
    """, f"--junitxml={report}")
    result.assert_outcomes(passed=1)
    text = report.read_text()
    assert 'name="accelerator_memory_capture"' in text and "snapshot_exit.pickle" in text


MARKED = """
    import pytest

    @pytest.mark.accelerator_memory(max_peak="1 GiB")
    def test_step():
        pass
"""


def test_without_torch_the_marker_skips_saying_so(pytester):
    pytester.makeconftest("import sys\nsys.modules['torch'] = None  # import torch fails\n")
    result = run(pytester, MARKED, "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*accelerator_memory: torch is not installed*"])


def test_without_an_accelerator_the_marker_skips_saying_why(pytester):
    pytester.makeconftest(textwrap.dedent("""
        import sys, types

        torch = types.ModuleType("torch")
        torch.__version__ = "2.6.0+cpu"
        torch.cuda = types.SimpleNamespace(is_available=lambda: False)
        torch.version = types.SimpleNamespace(cuda=None)
        sys.modules["torch"] = torch
        sys.modules["torch_npu"] = None
    """))
    result = run(pytester, MARKED, "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*accelerator_memory: no accelerator to record (torch "
                                 "2.6.0+cpu sees no CUDA or Ascend device here (a CPU "
                                 "build))*"])


def test_the_plugin_imports_neither_torch_nor_polars_at_start_up(pytester):
    pytester.makeconftest(textwrap.dedent("""
        import sys

        def pytest_collection_finish(session):
            heavy = sorted({"torch", "polars", "numpy"} & {m.split(".")[0] for m in sys.modules})
            print("HEAVY", heavy)
    """))
    pytester.makepyfile(test_plain="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess(*plugin_args(), "-s", *QUIET)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["HEAVY []"])
    assert "accelerator_memory" in pytester.runpytest_subprocess(
        *plugin_args(), *QUIET, "--markers").stdout.str()


def test_pyproject_declares_the_plugin_entry_point():
    import importlib
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    target = config["project"]["entry-points"]["pytest11"]["memtui"]
    assert target == "memtui.pytest_plugin"
    module = importlib.import_module(target)
    assert module.MARKER == "accelerator_memory"
