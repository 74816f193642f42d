"""Command line dispatch: ``memtui [PATH]`` opens the UI, ``memtui COMMAND ...`` runs a command.

Each command lives in its own module under :mod:`memtui.commands` and owns its arguments
and output; this module only picks one and applies the one error rule: every unreadable
input ends as one line on stderr, ``memtui: PATH: problem``, and exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from memtui.commands import COMMANDS
from memtui.errors import CaptureError
from memtui.version import __version__

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a command killed by it reports
#: Commands that say how far a long open is on stderr (the UI has its screen; serve, mcp
#: and record speak to something else).
_REPORTING = ("summary", "state", "findings", "compare", "check", "report", "export",
              "whatif")


def _command_module(name: str) -> ModuleType:
    return importlib.import_module(COMMANDS.get(name, "memtui.commands.ui"))


def _parser(name: str, module: ModuleType) -> argparse.ArgumentParser:
    if name in COMMANDS:
        return argparse.ArgumentParser(prog=f"memtui {name}", description=module.HELP)
    commands = "\n".join(
        f"  memtui {cmd:<9} {_command_module(cmd).HELP}" for cmd in COMMANDS
    )
    parser = argparse.ArgumentParser(
        prog="memtui",
        description="Terminal explorer for GPU and Ascend NPU memory captures.",
        epilog=f"commands:\n{commands}\n\n`memtui COMMAND --help` says more.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version)
    return parser


class _Version(argparse.Action):
    """``--version``: the version, and which snapshot reader this install uses (asked only
    when the option is given: finding out imports the reader)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="show the version and the snapshot reader in use, and exit"):  # noqa: A002
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from memtui.analysis.replay.compiled import replay_in_use
        from memtui.sources.common.compiled import pairing_in_use
        from memtui.sources.common.sqlite import rows_in_use
        from memtui.sources.torch_snapshot.reader_choice import reader_in_use

        print(f"memtui {__version__}\n{reader_in_use()}\n{pairing_in_use()}\n"
              f"{replay_in_use()}\n{rows_in_use()}")
        parser.exit()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` names (``sys.argv`` by default); its exit status."""
    return _dispatch(argv)[0]


def entry() -> None:
    """The installed ``memtui`` command: :func:`main`, then, after a command that only
    prints (its module sets ``QUICK_EXIT``) and succeeded, the process ends at once
    instead of tearing the interpreter down, which frees the loaded capture object by
    object (about 0.1 s per million events) for nothing.  Output is flushed first.

    Before anything else, the process's allocators are told to give freed memory back
    promptly (:mod:`memtui.process_memory`)."""
    from memtui import process_memory

    process_memory.apply()
    code, module = _dispatch(None)
    if code or not getattr(module, "QUICK_EXIT", False):
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BrokenPipeError, ValueError):
            stream.flush()
    os._exit(code)


def _dispatch(argv: Sequence[str] | None) -> tuple[int, ModuleType]:
    argv = list(sys.argv[1:] if argv is None else argv)
    name = argv[0] if argv and argv[0] in COMMANDS else ""
    module = _command_module(name)
    parser = _parser(name, module)
    module.add_arguments(parser)
    args = parser.parse_args(argv[1:] if name else argv)
    if getattr(args, "no_cache", False):
        from memtui import cache

        cache.disable()
    reporter = _stderr_progress(name)
    try:
        return module.run(args), module
    except CaptureError as exc:
        _end_progress(reporter)  # (a live line erased first: the error stays one line)
        print(f"memtui: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT, module
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED, module
    except BrokenPipeError:  # the reader went away (``| head``): no traceback, no retry
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE, module
    finally:
        _end_progress(reporter)
        from memtui import cache

        cache.wait_for_stores()  # an entry being written in the background is finished


def _stderr_progress(name: str):
    """The command's report of long opens on stderr (:mod:`memtui.progress`), made the
    process's default; None for commands that do not report or where it is off."""
    if name not in _REPORTING:
        return None
    from memtui import progress

    reporter = progress.stderr_progress()
    progress.set_default(reporter)
    return reporter


def _end_progress(reporter) -> None:
    if reporter is not None:
        from memtui import progress

        reporter.close()
        progress.set_default(None)


if __name__ == "__main__":
    entry()
