"""MemtuiApp's mixins declare what they take from one another (memtui/tui/app_parts.py):
each mixin reads on ``self`` only what it defines, what Textual's App has, or what its
Protocol declares; and the app provides everything declared."""

from __future__ import annotations

import ast
import inspect
import textwrap

from textual.app import App

from memtui.tui.app import MemtuiApp
from memtui.tui.app_parts import NEEDS, declared

MIXINS = [c for c in MemtuiApp.__mro__[1:] if c.__module__.startswith("memtui.")]


def _self_attributes(cls: type) -> tuple[set[str], set[str]]:
    """(names ``cls``'s source assigns on self, names it reads on self)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    stored, read = set(), set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "self"):
            (stored if isinstance(node.ctx, ast.Store) else read).add(node.attr)
    return stored, read


def _textual_names() -> set[str]:
    return set(dir(App)) | set(vars(App()))


def taken_from_others(cls: type, textual: set[str]) -> set[str]:
    """What ``cls`` reads on self that neither it nor Textual's App defines."""
    stored, read = _self_attributes(cls)
    return read - stored - set(vars(cls)) - textual


def test_every_mixin_has_its_protocol():
    assert MIXINS, "MemtuiApp has no mixins?"
    assert {c.__name__ for c in MIXINS} == set(NEEDS)


def test_each_mixin_takes_only_what_its_protocol_declares():
    textual = _textual_names()
    undeclared = {c.__name__: sorted(taken_from_others(c, textual) - declared(NEEDS[c.__name__]))
                  for c in MIXINS}
    assert not any(undeclared.values()), (
        "declare these in the mixin's Protocol in memtui/tui/app_parts.py: "
        f"{ {k: v for k, v in undeclared.items() if v} }")


def test_the_app_provides_everything_declared():
    provided = set(dir(MemtuiApp))
    for cls in (MemtuiApp, *MIXINS):
        provided |= _self_attributes(cls)[0]
    missing = {name: sorted(declared(p) - provided) for name, p in NEEDS.items()}
    assert not any(missing.values()), {k: v for k, v in missing.items() if v}


class _Reaching:
    def act(self) -> None:
        self.mine = 1
        print(self.mine, self.trace, self.undeclared_thing, self.notify)


def test_an_undeclared_reach_is_found():
    taken = taken_from_others(_Reaching, _textual_names())
    assert taken == {"trace", "undeclared_thing"}
    assert taken - declared(NEEDS["CursorMoves"]) == {"undeclared_thing"}
