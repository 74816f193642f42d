"""The README is a door and the docs say what is there (issue 35).

Every ``memtui COMMAND --option`` the README and ``docs/`` name in code (inline code and code
blocks) is a command of the CLI taking that option; every key in a key table (a table whose
first column is headed ``key``) is bound on the screen its section names; the README stays
at most 300 lines with the recipes for making each kind of capture in its first 80, and the
test command ``.ci/run`` reads is there as it reads it.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
from textual.binding import Binding

from memtui.cli import _command_module, _parser
from memtui.commands import COMMANDS
from tests.conftest import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
README_MAX_LINES = 300
RECIPES_WITHIN = 80

#: How the docs write a key -> Textual's name of it.
KEY_NAMES = {
    "←": "left", "→": "right", "↑": "up", "↓": "down", "Enter": "enter", "Tab": "tab",
    "Esc": "escape", "Space": "space", "PgUp": "pageup", "PgDn": "pagedown", "Home": "home",
    "End": "end", "[": "left_square_bracket", "]": "right_square_bracket",
    "?": "question_mark", "/": "slash", "+": "plus", "=": "equals_sign", "-": "minus",
    ",": "comma", ".": "full_stop", "<": "less_than_sign", ">": "greater_than_sign",
}


# -- reading the docs ---------------------------------------------------------------------

#: Fenced blocks in these languages hold no command lines.
NOT_SHELL = ("python", "json", "toml")


def code_lines(text: str) -> list[str]:
    """Inline code spans and the lines of fenced shell or text blocks of a Markdown text,
    without their comments."""
    found: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        if line.startswith("```"):
            fence = line[3:].strip() if fence is None else None
            continue
        if fence is None:
            found.extend(re.findall(r"`([^`]+)`", line))
        elif fence not in NOT_SHELL:
            found.append(re.sub(r"(^|\s)#.*", "", line))
    return found


def command_uses(text: str) -> list[tuple[str, list[str]]]:
    """``(command, options)`` of each ``memtui ...`` in code: command ``""`` is the UI
    (``memtui PATH``); options are the ``-x`` / ``--xx`` words up to a bare ``--``, a
    comment, a pipe or the next shell command."""
    uses = []
    for code in code_lines(text):
        for match in re.finditer(r"(?:^|[\s(;&])memtui(?=\s|$)((?:\s+[^\s#|;&]+)*)", code):
            try:
                words = shlex.split(match.group(1), comments=True)
            except ValueError:
                words = match.group(1).split()
            words = [w.strip("[]()") for w in words]
            name = ""
            if words and re.fullmatch(r"[a-z]+", words[0]):
                name, words = words[0], words[1:]
            options = []
            for word in words:
                if word == "--":
                    break
                if re.fullmatch(r"--?[A-Za-z][\w-]*(=.*)?", word):
                    options.append(word.split("=", 1)[0])
            uses.append((name, options))
    return uses


def key_tables(text: str) -> list[tuple[str, list[str]]]:
    """``(heading, keys)`` of each key table: the backticked keys of its first column, under
    the nearest heading above it."""
    tables: list[tuple[str, list[str]]] = []
    heading = ""
    in_table = False
    for line in text.splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        cells = [c.strip() for c in line.strip().strip("|").split("|")] \
            if line.startswith("|") else None
        if cells is None:
            in_table = False
        elif cells[0] == "key":
            tables.append((heading, []))
            in_table = True
        elif in_table and not set(cells[0]) <= set("-: "):
            tables[-1][1].extend(re.findall(r"`([^`]+)`", cells[0]))
    return tables


def key_name(shown: str) -> str:
    """Textual's name of a key as the docs write it (``Shift+←`` -> ``shift+left``)."""
    *modifiers, key = shown.split("+") if len(shown) > 1 and "+" in shown[1:] else [shown]
    name = KEY_NAMES.get(key, key.lower() if modifiers else key)
    return "+".join([*(m.lower() for m in modifiers), name])


# -- what the program has -----------------------------------------------------------------

def options_of(command: str) -> set[str]:
    module = _command_module(command)
    parser = _parser(command, module)
    module.add_arguments(parser)
    return set(parser._option_string_actions)


def keys_of(bindings) -> set[str]:
    keys: set[str] = set()
    for binding in bindings:
        key = binding.key if isinstance(binding, Binding) else binding[0]
        keys.update(k.strip() for k in key.split(","))
    return keys


def bound_keys() -> dict[str, set[str]]:
    """The keys bound where each section of the docs says, by the section's name."""
    from memtui.tui.app import MemtuiApp
    from memtui.tui.compare_app import CompareApp
    from memtui.tui.ranks_app import RanksApp
    from memtui.tui.screens import SCREENS
    from memtui.tui.screens.diff import DiffScreen
    from memtui.tui.screens.ranks import RanksScreen
    from memtui.tui.widgets.table import VirtualTable

    everywhere = set(MemtuiApp()._bindings.key_to_bindings)  # with Textual's own
    following = set(MemtuiApp(trace_path="follow.db", follow=True)._bindings.key_to_bindings)
    return {
        "Everywhere": everywhere, "Keys": everywhere,
        "Trend": keys_of(SCREENS["trend"].BINDINGS),
        "Blocks": keys_of(SCREENS["blocks"].BINDINGS),
        "Pool": keys_of(SCREENS["pool"].BINDINGS),
        "Stacks": keys_of(SCREENS["stacks"].BINDINGS),
        "Tables": keys_of(SCREENS["tables"].BINDINGS) | keys_of(VirtualTable.BINDINGS),
        "Findings": keys_of(SCREENS["findings"].BINDINGS),
        "Ranks": keys_of(RanksScreen.BINDINGS) | keys_of(RanksApp.BINDINGS),
        "Compare mode": keys_of(CompareApp.BINDINGS) | keys_of(DiffScreen.BINDINGS),
        "Following": following,
    }


def section_keys(heading: str, bound: dict[str, set[str]]) -> set[str] | None:
    """The keys of the section a heading names (``## 5 Tables`` is Tables), None where it
    names none."""
    name = re.sub(r"^\d+\s+", "", heading)
    return bound.get(name)


# -- the tests ----------------------------------------------------------------------------

def test_the_docs_folder_has_a_page_per_topic():
    pages = {p.name for p in DOCS if p.parent.name == "docs"}
    assert {"screens-and-keys.md", "findings-and-whatif.md", "ci-and-api.md",
            "live-and-ranks.md", "formats.md", "hostile-input-and-cache.md",
            "development.md", "performance.md"} <= pages


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_every_command_and_option_named_exists(page: Path):
    known = {name: options_of(name) for name in ["", *COMMANDS]}
    wrong = []
    for name, options in command_uses(page.read_text()):
        if name not in known:
            wrong.append(f"memtui {name}: no such command")
            continue
        wrong += [f"memtui {name} {o}".replace("  ", " ") + ": no such option"
                  for o in options if o not in known[name]]
    assert not wrong, f"{page.name} names what the CLI lacks: {sorted(set(wrong))}"


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_every_key_in_a_key_table_is_bound(page: Path):
    bound = bound_keys()
    wrong = []
    for heading, keys in key_tables(page.read_text()):
        scope = section_keys(heading, bound)
        if scope is None:
            wrong.append(f"a key table under {heading!r}, which names no screen")
            continue
        wrong += [f"{heading}: {k}" for k in keys if key_name(k) not in scope]
    assert not wrong, f"{page.name} names keys that are not bound: {wrong}"


def test_the_screens_page_has_a_key_table_for_every_screen():
    tables = dict(key_tables((REPO / "docs" / "screens-and-keys.md").read_text()))
    named = {re.sub(r"^\d+\s+", "", heading) for heading in tables}
    assert {"Everywhere", "Trend", "Blocks", "Pool", "Stacks", "Tables", "Findings",
            "Ranks", "Compare mode", "Following"} <= named


def test_the_readme_is_a_door():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES
    first = "\n".join(lines[:RECIPES_WITHIN])
    for recipe in ("torch.cuda.memory._record_memory_history", "_dump_snapshot",
                   "memtui record", "msmemscope", "torch_npu.profiler", "profile_memory=True"):
        assert recipe in first, f"{recipe} is not in the README's first {RECIPES_WITHIN} lines"
    links = re.findall(r"\]\(([^)#]+)", "\n".join(lines))
    missing = [link for link in links if not link.startswith("http")
               and not (REPO / link).exists()]
    assert not missing


def test_links_between_pages_lead_somewhere():
    missing = []
    for page in DOCS:
        for link in re.findall(r"\]\(([^)#]+)", page.read_text()):
            if not link.startswith("http") and not (page.parent / link).exists():
                missing.append(f"{page.name} -> {link}")
    assert not missing


def test_the_test_command_is_where_ci_reads_it():
    """.ci/run's own awk program finds the README's test command."""
    program = re.search(r"awk '(.*?)' README.md", (REPO / ".ci" / "run").read_text(), re.S)
    assert program
    found = subprocess.run(["awk", program.group(1), "README.md"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout
    assert found.strip() == "pip install -e '.[test]' && python -m pytest -q"


# -- the checks themselves can fail --------------------------------------------------------

def test_a_command_or_option_that_does_not_exist_is_caught():
    assert command_uses("run `memtui frobnicate PATH` then") == [("frobnicate", [])]
    assert command_uses("```sh\nmemtui check a.pickle --max-peek 4GiB  # x --y\n```") == \
        [("check", ["--max-peek"])]
    assert command_uses("`memtui record --out d -- python t.py --lr 3`") == \
        [("record", ["--out"])]
    assert command_uses("`memtui run.db` and `memtui.open(p)`") == [("", [])]
    assert "--max-peek" not in options_of("check") and "--max-peak" in options_of("check")


def test_a_key_that_is_not_bound_is_caught():
    text = "## 5 Tables\n\n| key | does |\n|---|---|\n| `s` | sort |\n| `Q` `Shift+←` | x |\n"
    (heading, keys), = key_tables(text)
    bound = bound_keys()
    scope = section_keys(heading, bound)
    assert [key_name(k) in scope for k in keys] == [True, False, False]
    assert key_name("Ctrl+P") in bound["Everywhere"] and key_name("?") in bound["Everywhere"]
    assert section_keys("Somewhere else", bound) is None
