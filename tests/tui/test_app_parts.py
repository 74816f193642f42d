"""MemtuiApp's mixins declare what they take from one another (memtui/tui/app_parts.py):
each mixin reads on ``self`` only what it defines, what Textual's App has, or what its
Protocol declares; and the app provides everything declared.  Likewise the map screens'
shared parts read on a screen only what ``linked.MapScreen`` declares, and the screens that
hand themselves over set what their ``prepare()`` must."""

from __future__ import annotations

import ast
import inspect
import textwrap

from textual.app import App

from memtui.tui.app import MemtuiApp
from memtui.tui.app_parts import NEEDS, declared
from memtui.tui.screens import linked
from memtui.tui.screens.blocks import BlocksScreen
from memtui.tui.screens.pool import PoolScreen

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


# -- the map screens' shared parts (memtui/tui/screens/linked.py, MapScreen) ---------------

MAP_PARTS = (linked.select_event_block, linked.find_address, linked.block_details)
SET_BY_PREPARE = {"index", "book", "events"}  # the rest a LinkedScreen has itself


def _screen_reads(function) -> set[str]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    return {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name) and node.value.id == "screen"}


def test_the_map_parts_read_only_what_map_screen_declares():
    for part in MAP_PARTS:
        assert _screen_reads(part) <= declared(linked.MapScreen), part.__name__


def test_map_screen_declares_what_a_linked_screen_lacks_as_set_by_prepare():
    assert declared(linked.MapScreen) - set(dir(linked.LinkedScreen)) - {
        "trace", "cursor"} == SET_BY_PREPARE


def test_each_screen_handing_itself_to_the_parts_sets_them():
    for screen in (BlocksScreen, PoolScreen):
        stored, _ = _self_attributes(screen)
        assert stored >= SET_BY_PREPARE, (screen.__name__, SET_BY_PREPARE - stored)
