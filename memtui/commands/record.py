"""``memtui record [options] -- python train.py ARGS``: run a script with memory recording on.

The script runs unchanged in a child process whose ``PYTHONPATH`` starts with
``memtui/record/site`` (a ``sitecustomize`` that loads the recorder when the script imports
torch); its arguments and exit status pass through.  Snapshots land in ``--out``, which
``memtui --follow`` shows live in another pane.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

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
    env = dict(os.environ)
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
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CaptureError(args.out, f"cannot create the folder ({exc.strerror})") from None
    settings = Settings(out=str(out), every=args.every or None, on_oom=args.on_oom,
                        max_entries=args.max_entries, stacks=args.stacks, keep=args.keep)
    print(f"memtui record: dumps go to {out}; watch them live in another pane with:\n"
          f"    memtui --follow {shlex.quote(str(out))}", file=sys.stderr, flush=True)
    return _run_child(command, child_environment(settings.to_json()))


def _run_child(command: list[str], env: dict[str, str]) -> int:
    """Run the child to its end; Ctrl+C goes to it (same process group), not to us."""
    from memtui.errors import CaptureError

    try:
        process = subprocess.Popen(command, env=env)
    except OSError as exc:
        raise CaptureError(command[0], f"cannot run it ({exc.strerror})") from None
    # Ignored only after the start: an ignored signal would be inherited by the child.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        code = process.wait()
    finally:
        signal.signal(signal.SIGINT, previous)
    return 128 - code if code < 0 else code
