"""``memtui record [options] -- python train.py ARGS``: run a script with memory recording on.

The script runs unchanged in a child process whose ``PYTHONPATH`` starts with
``memtui/record/site`` (a ``sitecustomize`` that loads the recorder when the script imports
torch); its arguments and exit status pass through.  Snapshots land in ``--out``, which
``memtui --follow`` shows live in another pane.

The child runs in a process group of its own, given the terminal where memtui had it:
SIGTERM, SIGINT and SIGHUP sent to memtui (a scheduler, ``kill``, memtui as PID 1 of a
container, where an unhandled SIGTERM would be ignored) are passed to that whole group,
memtui waits for the job (and its exit dump), then exits with the job's status.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from memtui import process_memory

HELP = "run a PyTorch script with memory history recorded into snapshot dumps"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = "memtui record [options] -- python script.py [ARGS...]"
    parser.add_argument("--out", default="memtui_record", metavar="DIR",
                        help="folder for the dumps (default: memtui_record)")
    parser.add_argument("--every", type=float, default=60.0, metavar="SECONDS",
                        help="seconds between dumps; 0: only on OOM and at exit (default: 60)")
    parser.add_argument("--on-oom", action=argparse.BooleanOptionalAction, default=True,
                        help="dump at an out-of-memory error (default: on)")
    parser.add_argument("--max-entries", type=int, default=100_000, metavar="N",
                        help="events the allocator keeps in its history (default: 100000)")
    parser.add_argument("--stacks", choices=("python", "all"), default="python",
                        help="call stacks to record: python, or all (C++ too)")
    parser.add_argument("--keep", type=int, default=5, metavar="N",
                        help="interval dumps kept, the oldest deleted (default: 5)")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="the command to run, after --: python script.py ARGS")


def child_command(command: list[str]) -> list[str]:
    """The command as given, with ``script.py ...`` run by this Python."""
    if command and command[0] == "--":
        command = command[1:]
    if command and command[0].endswith(".py"):
        return [sys.executable, *command]
    return command


def child_environment(settings_json: str) -> dict[str, str]:
    """The environment of the child: the recorder's sitecustomize first on PYTHONPATH."""
    from memtui.record.recorder import CONFIG_ENV

    site = Path(__file__).resolve().parent.parent / "record" / "site"
    env = process_memory.for_children(os.environ)  # the user's, not the viewer's settings
    paths = [str(site)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env[CONFIG_ENV] = settings_json
    return env


def run(args: argparse.Namespace) -> int:
    from memtui.errors import CaptureError
    from memtui.record.recorder import Settings

    command = child_command(list(args.command))
    if not command:
        raise CaptureError("record", "no command to run: memtui record -- python "
                                     "script.py ARGS")
    if args.max_entries <= 0 or args.keep < 1 or args.every < 0:
        raise CaptureError("record", "--max-entries and --keep must be positive, "
                                     "--every 0 or more")
    out = Path(args.out).resolve()
    made = not os.path.lexists(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CaptureError(args.out, f"cannot create the folder ({exc.strerror})") from None
    try:
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as exc:  # fail now, not at every dump of a long job
        raise CaptureError(args.out, f"cannot write dumps in this folder ({exc.strerror})"
                           ) from None
    settings = Settings(out=str(out), every=args.every or None, on_oom=args.on_oom,
                        max_entries=args.max_entries, stacks=args.stacks, keep=args.keep)
    from memtui.errors import printable

    print(f"memtui record: dumps go to {printable(str(out))}; watch them live in another "
          f"pane with:\n    memtui --follow {printable(shlex.quote(str(out)))}",
          file=sys.stderr, flush=True)
    from memtui.record.recorder import SEEN_ENV

    env = child_environment(settings.to_json())
    seen = tempfile.mkdtemp(prefix="memtui-record-")
    env[SEEN_ENV] = seen
    try:
        code = _run_child(command, env)
        seen_names = os.listdir(seen)
    finally:
        shutil.rmtree(seen, ignore_errors=True)
    if any(name.endswith(".recording") for name in seen_names):
        return code
    if made:  # nothing recorded: no empty folder left behind
        with contextlib.suppress(OSError):
            out.rmdir()
    if code:  # the job's own failure says more than what was not recorded
        return code
    if not seen_names:
        raise CaptureError(shlex.quote(command[0]), "ran no Python that memtui could record "
                                                    "in: nothing was recorded (memtui record "
                                                    "-- python script.py ARGS)")
    raise CaptureError("record", "nothing was recorded (the line above says why): the job "
                                 "ran to its end unrecorded")


#: What memtui passes on to the job's process group.
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _run_child(command: list[str], env: dict[str, str]) -> int:
    """Run the child in its own process group to its end, passing :data:`FORWARDED`
    signals on to that group; its exit status (128 + N for signal N)."""
    from memtui.errors import CaptureError

    group: list[int] = []  # the child's process group, once it exists
    early: list[int] = []  # signals that came before it did

    def forward(signum: int, _frame: object) -> None:
        if not group:
            early.append(signum)
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group[0], signum)

    previous = {signum: signal.signal(signum, forward) for signum in FORWARDED}
    terminal = None
    try:
        try:
            process = subprocess.Popen(command, env=env, process_group=0)
        except OSError as exc:
            raise CaptureError(command[0], f"cannot run it ({exc.strerror})") from None
        group.append(process.pid)
        terminal = _hand_terminal_to(process.pid)
        for signum in early:
            forward(signum, None)
        code = process.wait()
    finally:
        _take_terminal_back(terminal)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 128 - code if code < 0 else code


def _hand_terminal_to(group: int) -> int | None:
    """Make ``group`` the foreground of memtui's terminal where memtui held it (Ctrl+C
    then reaches the job once, from the terminal); the terminal's descriptor, or None."""
    try:
        fd = sys.stdin.fileno()
        if not os.isatty(fd) or os.tcgetpgrp(fd) != os.getpgrp():
            return None
        os.tcsetpgrp(fd, group)
        return fd
    except (OSError, ValueError, AttributeError):
        return None


def _take_terminal_back(fd: int | None) -> None:
    if fd is None:
        return
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # we are in the background now
    try:
        with contextlib.suppress(OSError):
            os.tcsetpgrp(fd, os.getpgrp())
    finally:
        signal.signal(signal.SIGTTOU, previous)
