"""``memtui record`` and ``memtui.record.recording``: dumps at the interval, at an OOM and at
exit, each written whole; the wrapped script's arguments and exit status pass through.

No GPU here: the dumps come from a fake backend (in-process) or a fake ``torch_npu``
package put on the child's path (which the recorder finds exactly as the real one, through
``torch.npu.is_available()`` and ``torch_npu.npu.memory``); the wrapper itself runs with the
real CPU build of torch and must say that nothing could be recorded.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from memtui.cli import main
from memtui.record import recording
from memtui.record.recorder import Recorder, Settings, write_atomically
from memtui.sources import open_capture
from tests.helpers.live_captures import MiB, grown_snapshot


class FakeBackend:
    """Grows by one block per snapshot; remembers its OOM observer."""

    name = "fake"

    def __init__(self) -> None:
        self.calls = 0
        self.enabled = None
        self.observer = None

    def enable(self, settings):
        self.enabled = settings

    def disable(self):
        self.enabled = None

    def snapshot(self):
        self.calls += 1
        return grown_snapshot(min(self.calls, 60))

    def attach_oom(self, callback):
        self.observer = callback
        return True


def wait_for(condition, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def dumps(folder: Path, reason: str = "") -> list[Path]:
    return sorted(p for p in folder.glob(f"snapshot_*{reason}.pickle"))


def test_recording_dumps_at_the_interval_and_at_exit(tmp_path):
    backend = FakeBackend()
    with recording(tmp_path, every=0.05, backend=backend, keep=100) as recorder:
        assert backend.enabled.stacks == "python"
        assert wait_for(lambda: len(dumps(tmp_path, "interval")) >= 2)
    assert backend.enabled is None  # history off again
    assert len(dumps(tmp_path, "exit")) == 1
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind
    last = dumps(tmp_path, "exit")[0]
    assert recorder.dumps[-1] == last
    devices = open_capture(last).meta.devices
    assert devices[0].allocated_at_end == backend.calls * MiB


def test_an_oom_dumps_the_state_at_the_failure(tmp_path):
    backend = FakeBackend()
    with recording(tmp_path, every=None, backend=backend):
        backend.observer(0, 8 * MiB, 60 * MiB, 4 * MiB)
        assert [p.name.endswith("_oom.pickle") for p in dumps(tmp_path)] == [True]
    assert len(dumps(tmp_path, "oom")) == 1 and len(dumps(tmp_path, "exit")) == 1


def test_old_interval_dumps_are_pruned_but_not_oom_ones(tmp_path):
    recorder = Recorder(Settings(out=str(tmp_path), every=None, keep=2), FakeBackend())
    recorder.start()
    recorder.dump("oom")
    for _ in range(5):
        recorder.dump("interval")
    recorder.stop()
    assert len(dumps(tmp_path, "interval")) == 2
    assert len(dumps(tmp_path, "oom")) == 1


def test_a_reader_never_sees_a_partial_dump(tmp_path):
    """A reader listing the folder while dumps are written only ever finds whole pickles."""
    payload = pickle.dumps(grown_snapshot(60), protocol=4) * 20  # ~ a few hundred kB
    done = threading.Event()
    seen: list[str] = []
    passes = [0]  # the reader's finished looks at the folder

    def reader() -> None:
        while not done.is_set():
            for path in tmp_path.glob("snapshot_*.pickle"):
                try:
                    data = path.read_bytes()
                except FileNotFoundError:
                    continue
                seen.append("whole" if data == payload else f"partial {len(data)}")
            passes[0] += 1

    def reader_passes(count: int) -> None:
        """Wait until the reader has looked at the folder ``count`` more times (a busy
        machine may leave the reader thread unscheduled while every dump is written)."""
        wanted, deadline = passes[0] + count, time.monotonic() + 30
        while passes[0] < wanted and time.monotonic() < deadline:
            time.sleep(0.001)

    thread = threading.Thread(target=reader)
    thread.start()
    reader_passes(1)
    for i in range(40):
        write_atomically(tmp_path / f"snapshot_{i:03d}.pickle", payload)
    reader_passes(2)  # (at least one look with every dump in place)
    done.set()
    thread.join()
    assert seen and set(seen) == {"whole"}


def test_recording_without_an_accelerator_still_runs_the_block(tmp_path, capsys):
    pytest.importorskip("torch", reason="the record extra (torch) is not installed")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the no-accelerator path is not reachable")
    ran = []
    with recording(tmp_path, every=0.05):
        ran.append(True)
    assert ran == [True]
    assert "no accelerator memory history can be recorded" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


# -- the wrapper, with the real CPU torch ------------------------------------------------------

SCRIPT = """
import sys
import torch

x = torch.ones(4)
print("args:", sys.argv[1:])
sys.exit(int(sys.argv[1]))
"""


def run_record(tmp_path: Path, *args: str, env_path: str | None = None):
    import os

    env = dict(os.environ)
    repo = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env_path, repo) if p)
    return subprocess.run([sys.executable, "-m", "memtui.cli", "record", *args],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)


def test_record_runs_the_script_with_its_arguments_and_exit_status(tmp_path):
    pytest.importorskip("torch", reason="the record extra (torch) is not installed")
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    out = tmp_path / "dumps"
    result = run_record(tmp_path, "--out", str(out), "--every", "1", "--",
                        sys.executable, str(script), "3", "--lr", "a b")
    assert result.returncode == 3
    assert "args: ['3', '--lr', 'a b']" in result.stdout
    assert f"memtui --follow {out}" in result.stderr
    import torch

    if not torch.cuda.is_available():
        assert "no accelerator memory history could be recorded" in result.stderr
        assert "CPU build" in result.stderr or "no CUDA" in result.stderr


FAKE_TORCH_NPU = '''
"""A stand-in for torch_npu: the API memtui's recorder calls, snapshots that grow."""
import types
import pickle
import torch

_state = {"calls": 0, "enabled": None, "observer": None}


def _record_memory_history(enabled="all", **kwargs):
    _state["enabled"] = (enabled, kwargs)


def _snapshot():
    _state["calls"] += 1
    return pickle.loads(bytes.fromhex(SNAPSHOTS[min(_state["calls"], len(SNAPSHOTS)) - 1]))


def oom():
    _state["observer"](0, 1 << 30, 0, 0)


npu = types.SimpleNamespace(memory=types.SimpleNamespace(
    _record_memory_history=_record_memory_history, _snapshot=_snapshot))
_C = types.SimpleNamespace(
    _npu_attach_out_of_memory_observer=lambda cb: _state.__setitem__("observer", cb))
torch.npu = types.SimpleNamespace(is_available=lambda: True)
'''

NPU_SCRIPT = """
import sys, time
import torch
import torch_npu

deadline = time.monotonic() + 60
while time.monotonic() < deadline and len([
        n for n in __import__("os").listdir(sys.argv[1]) if n.endswith("_interval.pickle")]) < 2:
    time.sleep(0.05)
torch_npu.oom()
print("history:", torch_npu._state["enabled"])
"""


def test_record_dumps_at_the_interval_at_an_oom_and_at_exit(tmp_path):
    pytest.importorskip("torch", reason="the record extra (torch) is not installed")
    fake = tmp_path / "fake" / "torch_npu"
    fake.mkdir(parents=True)
    snapshots = [pickle.dumps(grown_snapshot(n), protocol=4).hex() for n in range(1, 30)]
    fake.joinpath("__init__.py").write_text(f"SNAPSHOTS = {snapshots!r}\n" + FAKE_TORCH_NPU)
    script = tmp_path / "train.py"
    script.write_text(NPU_SCRIPT)
    out = tmp_path / "dumps"
    result = run_record(tmp_path, "--out", str(out), "--every", "0.2", "--stacks", "all",
                        "--max-entries", "1234", "--", str(script), str(out),
                        env_path=str(tmp_path / "fake"))
    assert result.returncode == 0, result.stderr
    assert "recording npu memory history" in result.stderr
    assert "'stacks': 'all'" in result.stdout and "'max_entries': 1234" in result.stdout
    names = [p.name for p in dumps(out)]
    assert sum(n.endswith("_interval.pickle") for n in names) >= 2
    assert sum(n.endswith("_oom.pickle") for n in names) == 1
    assert names[-1].endswith("_exit.pickle")
    assert not [p for p in out.iterdir() if p.name.startswith(".")]
    final = open_capture(out / names[-1])
    assert final.meta.devices[0].allocated_at_end > open_capture(out / names[0]).meta.devices[
        0].allocated_at_end


def test_a_sigterm_still_dumps_and_the_status_says_so(tmp_path):
    """torchrun and schedulers stop workers with SIGTERM, which skips atexit: the recorder
    dumps first, and the process still dies of the signal (128 + 15 through the wrapper)."""
    pytest.importorskip("torch", reason="the record extra (torch) is not installed")
    fake = tmp_path / "fake" / "torch_npu"
    fake.mkdir(parents=True)
    snapshots = [pickle.dumps(grown_snapshot(n), protocol=4).hex() for n in (1, 2)]
    fake.joinpath("__init__.py").write_text(f"SNAPSHOTS = {snapshots!r}\n" + FAKE_TORCH_NPU)
    script = tmp_path / "train.py"
    script.write_text("import os, signal, torch, torch_npu\nos.kill(os.getpid(), signal.SIGTERM)\n")
    out = tmp_path / "dumps"
    result = run_record(tmp_path, "--out", str(out), "--every", "0", "--", str(script),
                        env_path=str(tmp_path / "fake"))
    assert result.returncode == 128 + 15, result.stderr
    assert [p.name.endswith("_exit.pickle") for p in dumps(out)] == [True]


def test_record_without_a_command_is_a_one_line_error(capsys):
    assert main(["record", "--out", "x"]) == 2
    err = capsys.readouterr().err
    assert "no command to run" in err
    # Issue 23 point 9: "memtui: memtui record: ..." said memtui twice.
    assert err.startswith("memtui: record: no command to run") and err.count("memtui:") == 1
    assert main(["record", "--keep", "0", "--", "python"]) == 2
    assert capsys.readouterr().err.startswith("memtui: record: --max-entries and --keep")


def test_record_says_torch_is_missing_not_that_it_was_never_imported(tmp_path):
    """Issue 23 point 9: ``memtui record -- python -c "import torch"`` in a Python without
    torch said "the script never imported torch"; it tried, and torch is not there."""
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("torch is installed here: the missing-torch path is not reachable")
    result = run_record(tmp_path, "--out", str(tmp_path / "d"), "--", sys.executable, "-c",
                        "import torch")
    assert result.returncode == 1, result.stderr
    assert "ModuleNotFoundError" in result.stderr  # the script's own error, as it was
    assert f"torch is not installed in this Python ({sys.executable})" in result.stderr
    assert "never imported" not in result.stderr


def test_a_script_that_records_nothing_says_so_and_fails(tmp_path):
    """Issue 31 item 14: without torch the script ran unrecorded, exited 0 and left an
    empty memtui_record/; now it says so, exits 2 and leaves no empty folder (a folder
    that was there before is kept)."""
    result = run_record(tmp_path, "--", sys.executable, "-c", "print('trained')")
    assert result.returncode == 2, result.stderr
    assert "trained" in result.stdout
    assert "no accelerator memory history could be recorded" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(
        "memtui: record: nothing was recorded")
    assert not (tmp_path / "memtui_record").exists()
    (tmp_path / "kept").mkdir()
    result = run_record(tmp_path, "--out", "kept", "--", sys.executable, "-c", "pass")
    assert result.returncode == 2 and (tmp_path / "kept").is_dir()
    result = run_record(tmp_path, "--", sys.executable, "-c", "raise SystemExit(7)")
    assert result.returncode == 7  # the job's own failure passes through


def test_the_sitecustomize_keeps_the_users_own(tmp_path):
    pytest.importorskip("torch", reason="the record extra (torch) is not installed")
    user = tmp_path / "user"
    user.mkdir()
    user.joinpath("sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = '1'\n")
    script = tmp_path / "s.py"
    script.write_text(textwrap.dedent("""
        import os
        print("user site:", os.environ.get("USER_SITE_RAN"))
    """))
    result = run_record(tmp_path, "--out", str(tmp_path / "d"), "--", str(script),
                        env_path=str(user))
    assert result.returncode == 2, result.stderr  # it ran, unrecorded: said, not a success
    assert "user site: 1" in result.stdout
    assert "the script never imported torch" in result.stderr


def test_a_dump_is_never_written_through_a_planted_link(tmp_path):
    """A neighbour who can write in a shared --out folder plants links at the temporary
    names a dump used to take (``.NAME.tmp``): the dump is written beside them, never
    through them, and appears whole under its own name."""
    target = tmp_path / "target.txt"
    target.write_text("theirs\n")
    out = tmp_path / "dumps"
    out.mkdir()
    name = "snapshot_000_exit.pickle"
    (out / f".{name}.tmp").symlink_to(target)
    write_atomically(out / name, b"payload")
    assert target.read_text() == "theirs\n"
    assert (out / name).read_bytes() == b"payload" and not (out / name).is_symlink()
    assert sorted(p.name for p in out.iterdir()) == [f".{name}.tmp", name]
