"""``--roles FILE`` and ``[tool.memtui.roles]``: the user's role rules for a command.

Every command that shows roles takes ``--roles FILE`` (a TOML file holding a
``[tool.memtui.roles]`` table, or a ``[roles]`` one, or the role keys at its top level);
without it the nearest ``pyproject.toml`` above the current folder is read for
``[tool.memtui.roles]`` (none: memtui's own rules alone).  A file that cannot be read,
is not TOML, or holds a bad table is one line naming it, exit status 2
(:func:`memtui.analysis.roles.user_rules.parse_rules` says what is wrong); a pyproject
found by search that is not TOML is someone else's and is passed over.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from memtui.errors import CaptureError


def add_roles_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--roles", metavar="FILE",
                        help="role rules: a TOML file with [tool.memtui.roles] (role = "
                             "regular expression(s) on frames, owners or metadata; default: "
                             "the nearest pyproject.toml's)")


def rules_from_file(path: Path, given: bool = True):
    """The :class:`~memtui.analysis.roles.user_rules.RoleRules` of ``path`` (None where a
    pyproject found by search has no ``[tool.memtui.roles]``, or is not TOML)."""
    from memtui.analysis.roles.user_rules import parse_rules
    from memtui.settings import read_toml, tool_section

    try:
        data = read_toml(path)
    except CaptureError:
        if not given:  # someone else's pyproject.toml, found by search: not memtui's
            return None
        raise
    table, where = tool_section(data, "roles", path), "[tool.memtui.roles]"
    if not table and given:
        if "roles" in data:
            table, where = data["roles"], "[roles]"
        elif not isinstance(data.get("tool"), dict):
            table, where = data, "the file's table"
    if not table:
        return None
    try:
        return parse_rules(table, where)
    except ValueError as exc:
        raise CaptureError(path, str(exc)) from None


def chosen_rules(args: argparse.Namespace):
    """The rules ``--roles`` names, else the nearest pyproject's, else None."""
    from memtui.settings import find_pyproject
    from memtui.sources.common.files import check_input

    given = getattr(args, "roles", None)
    if given is not None:
        path = Path(given)
        check_input(path)  # missing, unreadable (a link into /proc), not a file: one line
        if path.is_dir():
            raise CaptureError(given, "a folder, not a file of role rules (--roles)")
        return rules_from_file(path, given=True)
    try:
        found = find_pyproject(Path.cwd())
    except OSError:  # the current folder was removed: no settings above it
        found = None
    return rules_from_file(found, given=False) if found is not None else None


__all__ = ["add_roles_argument", "chosen_rules", "rules_from_file"]
