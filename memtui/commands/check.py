"""``memtui check PATH [--baseline A] [limits]``: exit 1 where a memory limit is broken.

For CI: the limits (``--max-peak 40GiB``, ``--max-leak-per-step 0``, ``--tolerance 5``
against ``--baseline``, ...) can also live in ``pyproject.toml`` under
``[tool.memtui.check]`` (the nearest one above the current folder, or ``--config``); the
command line overrides them.  Exit status 0 when every limit holds, 1 when one is broken,
2 for bad input.  The verdict is text (or ``--json``: the API's ``CheckResult.to_dict()``),
``--junit FILE`` writes one JUnit test case per limit, and under GitHub Actions
(``GITHUB_ACTIONS=true``) each broken limit is also an ``::error`` annotation.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from memtui.commands.paths import add_cache_argument
from memtui.commands.role_rules import add_roles_argument, chosen_rules
from memtui.errors import CaptureError

HELP = "check a capture against memory limits or a baseline: exit 1 where one is broken"
#: Only prints: the process may end without tearing the interpreter down (cli.entry).
QUICK_EXIT = True
#: The options that are limits, as ``[tool.memtui.check]`` spells them.
LIMIT_OPTIONS = ("max-peak", "max-reserved", "max-end", "max-leak-per-step", "max-role",
                 "tolerance", "allow-oom", "baseline")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("sizes: 512MiB, 2.5 GiB, 1e9, 0 (KiB, MiB, GiB: powers of 1024; "
                     "kB, MB, GB: of 1000). "
                     "Limits may also be set in pyproject.toml, [tool.memtui.check] "
                     "(max-peak = \"40 GiB\", tolerance = 5, baseline = \"base.pickle\"); "
                     "the command line overrides them.")
    parser.add_argument("path", help="the capture to check (file or folder)")
    parser.add_argument("--baseline", metavar="A",
                        help="a capture of the same job to compare against (peak, reserved "
                             "and end within --tolerance, no new leak, no new OOM)")
    parser.add_argument("--max-peak", metavar="SIZE", help="peak allocated, each device")
    parser.add_argument("--max-reserved", metavar="SIZE", help="peak reserved, each device")
    parser.add_argument("--max-end", metavar="SIZE", help="allocated at the end, each device")
    parser.add_argument("--max-role", metavar="ROLE=SIZE", action="append",
                        help="a role's bytes at any event, each device (repeatable: "
                             "--max-role optimizer_state=4GiB --max-role activation=20GiB; "
                             "roles: parameter, gradient, optimizer_state, activation, "
                             "temporary, input, cache, other)")
    parser.add_argument("--max-leak-per-step", metavar="SIZE",
                        help="bytes a leak may grow per step (default: no leak finding of "
                             "high severity)")
    parser.add_argument("--tolerance", metavar="PCT",
                        help="growth allowed against --baseline, in percent (default 5)")
    parser.add_argument("--allow-oom", action="store_true", default=None,
                        help="an out-of-memory error in the capture is not a failure")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--junit", metavar="FILE",
                        help="write JUnit XML: one test case per limit and device")
    parser.add_argument("--config", metavar="FILE",
                        help="the pyproject.toml holding [tool.memtui.check] (default: the "
                             "nearest one above the current folder)")
    add_cache_argument(parser)
    add_roles_argument(parser)


def configured_limits(path: Path | None) -> tuple[dict[str, Any], Path | None]:
    """``[tool.memtui.check]`` of ``path`` (empty without one), and where it was read;
    a baseline given there is taken relative to the file's folder.  Read by
    :mod:`memtui.settings`: a file or a table of the wrong shape is one line."""
    from memtui.settings import read_settings

    if path is None:
        return {}, None
    values = read_settings(path, "check", LIMIT_OPTIONS)
    baseline = values.pop("baseline", None)
    _validated(values, lambda key: path)
    if baseline is not None:
        if not isinstance(baseline, str) or not baseline or "\x00" in baseline:
            raise CaptureError(path, "[tool.memtui.check]: baseline must be the path of a "
                                     f"capture, not {baseline!r}")
        values["baseline"] = str(path.parent / baseline)
    return values, path


def _validated(values: dict[str, Any], blame) -> None:
    """Each limit readable (a size, a percentage, a flag), or the one-line error naming
    ``blame(key)``: the file it came from, or the option."""
    from memtui.analysis.limits.check import Limits

    for key, value in values.items():
        try:
            Limits.from_mapping({key: value})
        except ValueError as exc:
            raise CaptureError(blame(key), str(exc)) from None


def chosen_limits(args: argparse.Namespace) -> tuple[dict[str, Any], str | None]:
    """The limits (pyproject's, the command line's over them) and the baseline path."""
    from memtui.settings import find_pyproject

    if args.config:
        config = Path(args.config)
    else:
        try:
            config = find_pyproject(Path.cwd())
        except OSError:  # the current folder was removed: no settings above it
            config = None
    if args.config:
        from memtui.sources.common.files import check_input

        check_input(config)  # missing, unreadable, a folder: one line
    values, _ = configured_limits(config)
    given = {name: getattr(args, name.replace("-", "_")) for name in LIMIT_OPTIONS}
    given = {k: v for k, v in given.items() if v is not None}
    baseline = given.pop("baseline", values.pop("baseline", None))
    _validated(given, lambda key: f"--{key}")
    if "max-role" in given and "max-role" in values:  # role by role, the command line's over
        from memtui.analysis.limits.check import role_pairs

        given["max-role"] = dict(role_pairs(values["max-role"])) | dict(
            role_pairs(given["max-role"]))
    values.update(given)
    return values, baseline


def _settings_file() -> Path | None:
    """The pyproject.toml the settings were looked for in (an input too: ``--junit`` never
    writes over it)."""
    from memtui.settings import find_pyproject

    try:
        return find_pyproject(Path.cwd())
    except OSError:
        return None


def run(args: argparse.Namespace) -> int:
    from memtui.api import open_capture
    from memtui.text.check import github_annotations

    values, baseline = chosen_limits(args)
    inputs = [args.path, baseline, args.config, getattr(args, "roles", None), _settings_file()]
    junit = None
    if args.junit is not None:
        from memtui.outputs import output_file

        junit = output_file(args.junit, inputs=inputs)  # before any work
    rules = chosen_rules(args)
    capture = open_capture(args.path, store_in_background=True, roles=rules)
    reference = open_capture(baseline, store_in_background=True, roles=rules) if baseline else None
    result = capture.check(reference, limits=values)
    if junit is not None:
        from memtui.outputs import write_atomically

        try:
            write_atomically(junit, result.junit_xml(), inputs)
        except OSError as exc:
            raise CaptureError(junit, f"cannot write the JUnit XML ({exc.strerror or exc})") \
                from None
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for line in github_annotations(result.verdict):
            print(line, file=sys.stderr if args.json else sys.stdout)
    print(json.dumps(result.to_dict()) if args.json else result.text(), flush=True)
    return result.exit_code
