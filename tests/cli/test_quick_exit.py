"""The installed command (``cli.entry``) ends a printing command without tearing the
interpreter down: every line printed still arrives, through a pipe too, with the exit
status of the command; a reader that went away (``| head``) ends it quietly, 141."""

from __future__ import annotations

import subprocess
import sys

from memtui.cli import main

DEMO_COMMANDS = [["summary"], ["findings"], ["summary", "--json"]]


def run_installed(args: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memtui.cli", *args], capture_output=True,
                          text=True, timeout=120, **kwargs)


def test_every_line_arrives_through_the_pipe(capsys) -> None:
    for args in DEMO_COMMANDS:
        assert main(args) == 0
        expected = capsys.readouterr().out
        done = run_installed(args)
        assert (done.returncode, done.stderr) == (0, "")
        assert done.stdout == expected and expected.strip()


def test_a_failure_keeps_its_status_and_one_line(tmp_path) -> None:
    bad = tmp_path / "bad.pickle"
    bad.write_bytes(b"not a pickle at all")
    done = run_installed(["summary", str(bad)])
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and str(bad) in done.stderr



def test_a_reader_gone_before_the_output_is_no_traceback() -> None:
    pipe = subprocess.Popen([sys.executable, "-m", "memtui.cli", "summary", "--no-cache"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert pipe.stdout is not None
    pipe.stdout.close()  # long before the capture is loaded and printed (as `| head -0`)
    _, errors = pipe.communicate(timeout=120)
    assert (pipe.returncode, errors.decode()) == (141, "")
