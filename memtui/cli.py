"""Command line dispatch: ``memtui [PATH]`` opens the UI, ``memtui COMMAND ...`` runs a command.

Each command lives in its own module under :mod:`memtui.commands` and owns its arguments
and output; this module only picks one and applies the one error rule: every unreadable
input ends as one line on stderr, ``memtui: PATH: problem``, and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from memtui import __version__
from memtui.commands import COMMANDS
from memtui.errors import CaptureError

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


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
    parser.add_argument("--version", action="version", version=f"memtui {__version__}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    name = argv[0] if argv and argv[0] in COMMANDS else ""
    module = _command_module(name)
    parser = _parser(name, module)
    module.add_arguments(parser)
    args = parser.parse_args(argv[1:] if name else argv)
    if getattr(args, "no_cache", False):
        from memtui import cache

        cache.disable()
    try:
        return module.run(args)
    except CaptureError as exc:
        print(f"memtui: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    finally:
        from memtui import cache

        cache.wait_for_stores()  # an entry being written in the background is finished


if __name__ == "__main__":
    sys.exit(main())
