"""``memtui record`` under signals and bad set-ups (issue 27, points 5 and 14).

No torch needed: a fake ``torch`` and ``torch_npu`` on the child's path give the recorder
the API it calls (the real one is found the same way, through ``torch.npu.is_available()``
and ``torch_npu.npu.memory``).
"""

from __future__ import annotations

import errno
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memtui.record.recorder import Recorder, Settings
from tests.cli.test_record import FAKE_TORCH_NPU, FakeBackend, dumps, run_record, wait_for
from tests.helpers.live_captures import grown_snapshot

REPO = Path(__file__).resolve().parents[2]

FAKE_TORCH = '''
"""A stand-in for torch: just what memtui's recorder looks at."""
import types

__version__ = "0.0+fake"
version = types.SimpleNamespace(cuda=None)
cuda = types.SimpleNamespace(is_available=lambda: False)
'''

#: Writes its pid where asked, then waits to be stopped.
WAITING_SCRIPT = """
import os, sys, time
import torch, torch_npu
with open(sys.argv[1] + ".tmp", "w") as fh:
    fh.write(str(os.getpid()))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(120)
"""


def fake_packages(tmp_path: Path) -> Path:
    root = tmp_path / "fake"
    (root / "torch").mkdir(parents=True)
    (root / "torch" / "__init__.py").write_text(FAKE_TORCH)
    (root / "torch_npu").mkdir()
    snapshots = [pickle.dumps(grown_snapshot(n), protocol=4).hex() for n in (1, 2, 3)]
    (root / "torch_npu" / "__init__.py").write_text(f"SNAPSHOTS = {snapshots!r}\n"
                                                    + FAKE_TORCH_NPU)
    return root


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def start_recording(tmp_path: Path) -> tuple[subprocess.Popen, Path, Path]:
    script = tmp_path / "train.py"
    script.write_text(WAITING_SCRIPT)
    out, pid_file = tmp_path / "dumps", tmp_path / "job.pid"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(fake_packages(tmp_path)), str(REPO)])
    memtui = subprocess.Popen([sys.executable, "-m", "memtui.cli", "record", "--out", str(out),
                               "--every", "0", "--", str(script), str(pid_file)],
                              env=env, cwd=tmp_path, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert wait_for(pid_file.exists, 60), memtui.communicate(timeout=30)
    return memtui, out, pid_file


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 128 + 15),
                                                (signal.SIGINT, 128 + 2),
                                                (signal.SIGHUP, 128 + 1)])
def test_a_signal_to_memtui_reaches_the_job_which_dumps_and_its_status_passes(
        tmp_path, signum, status):
    memtui, out, pid_file = start_recording(tmp_path)
    job = int(pid_file.read_text())
    memtui.send_signal(signum)
    _, err = memtui.communicate(timeout=60)
    assert memtui.returncode == status, err
    assert not alive(job)  # not left running, re-parented
    assert [p.name.endswith("_exit.pickle") for p in dumps(out)] == [True], err
    assert "memtui/commands" not in err  # (the job's own KeyboardInterrupt is the job's)


def test_a_signal_to_the_job_alone_still_ends_memtui_with_its_status(tmp_path):
    memtui, out, pid_file = start_recording(tmp_path)
    os.kill(int(pid_file.read_text()), signal.SIGTERM)
    memtui.communicate(timeout=60)
    assert memtui.returncode == 128 + 15
    assert dumps(out, "_exit")


def test_an_out_folder_that_cannot_be_written_fails_at_once(tmp_path):
    started = time.monotonic()
    result = run_record(tmp_path, "--out", "/proc/1", "--", sys.executable, "-c",
                        "import time; time.sleep(60)")
    assert time.monotonic() - started < 30  # the job never ran
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("memtui: /proc/1: cannot write dumps in this folder")


def test_a_command_that_runs_no_python_says_nothing_was_recorded(tmp_path):
    result = run_record(tmp_path, "--out", str(tmp_path / "d"), "--", "true")
    assert result.returncode == 2  # (issue 31 item 14: nothing recorded is no success)
    assert "memtui: true: ran no Python that memtui could record in: nothing was recorded" \
        in result.stderr
    assert not (tmp_path / "d").exists()


def test_a_shell_script_that_runs_python_is_recorded_in(tmp_path):
    fake = fake_packages(tmp_path)
    script = tmp_path / "train.py"
    script.write_text("import torch, torch_npu\n")
    result = run_record(tmp_path, "--out", str(tmp_path / "d"), "--every", "0", "--", "sh",
                        "-c", f"{sys.executable} {script}", env_path=str(fake))
    assert result.returncode == 0, result.stderr
    assert "ran no Python" not in result.stderr
    assert dumps(tmp_path / "d", "_exit")


def test_a_full_disk_leaves_no_temporary_dump_and_says_so(tmp_path, monkeypatch, capsys):
    recorder = Recorder(Settings(out=str(tmp_path), every=None), FakeBackend())
    recorder.start()
    # the dump is written through os.fdopen on a temporary created exclusively
    # (write_atomically): that file is the one whose writes fail
    monkeypatch.setattr("memtui.record.recorder.os.fdopen",
                        lambda *a, **k: _FullFile(*a, **k))
    recorder.stop()
    assert list(tmp_path.iterdir()) == []  # no zero-length .tmp left
    assert "could not write the exit dump: the disk is full" in capsys.readouterr().err


class _FullFile:
    """A file opened for writing on a full disk: created, then every write fails."""

    def __init__(self, path_or_fd, mode="r", *args, **kwargs):
        self.file = open(path_or_fd, mode, *args, **kwargs)  # noqa: SIM115 - closed in __exit__

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()

    def write(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")
