"""A monkey on the real app: random keys from every binding, the palette, typing and
resizes from 20x6 to 200x60, on two captures; any exception fails.

The steps are drawn from ``random.Random(seed)``: ``MEMTUI_MONKEY_SEED`` picks another run
(the failing seed is in the assertion message), ``MEMTUI_MONKEY_STEPS`` a longer one.  The
short profile (CI) takes 100 steps per capture, ``MEMTUI_TEST_PROFILE=long`` 300
(tests/helpers/run_profile.py).
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import random

import pytest
from textual.binding import Binding

import memtui.tui.widgets
from memtui.tui.app import MemtuiApp
from memtui.tui.screens import SCREENS
from tests.conftest import REPO
from tests.helpers.hostile import hostile_trace
from tests.helpers.run_profile import by_profile
from tests.helpers.toy_traces import ready

DEMO = REPO / "snapshots" / "demo_training.pickle"
STEPS = int(os.environ.get("MEMTUI_MONKEY_STEPS", by_profile(100, 300)))
SEED = int(os.environ.get("MEMTUI_MONKEY_SEED", "12"))
#: Actions a monkey must not take: they end the run or write outside the test.
_FORBIDDEN = ("quit", "export", "copy", "suspend")
_EXTRA_KEYS = ["ctrl+p", "escape", "enter", "tab", "shift+tab", "backspace", "pagedown",
               "pageup", "home", "end", "up", "down", "left", "right", "space", "a", "0",
               "x", "f", "1", "2", "3", "4", "5", "6"]


def _bindings_of(cls) -> list[str]:
    keys = []
    for binding in getattr(cls, "BINDINGS", []):
        if isinstance(binding, Binding) and not any(w in binding.action for w in _FORBIDDEN):
            keys.extend(k.strip() for k in binding.key.split(","))
    return keys


def every_key() -> list[str]:
    """The keys of every binding of the app, its screens and its widgets (but quitting)."""
    classes = [MemtuiApp, *SCREENS.values()]
    for info in pkgutil.iter_modules(memtui.tui.widgets.__path__):
        module = importlib.import_module(f"memtui.tui.widgets.{info.name}")
        classes += [c for _, c in inspect.getmembers(module, inspect.isclass)
                    if c.__module__ == module.__name__]
    keys = {key for cls in classes for key in _bindings_of(cls)} | set(_EXTRA_KEYS)
    return sorted(k for k in keys if k not in ("q", "ctrl+q", "ctrl+c"))


async def _monkey(app: MemtuiApp, seed: int) -> None:
    rng = random.Random(seed)
    keys = every_key()
    size = (100, 30)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        for step in range(STEPS):
            roll = rng.random()
            if roll < 0.06:
                size = (rng.randint(20, 200), rng.randint(6, 60))
                await pilot.resize_terminal(*size)
            elif roll < 0.09:
                await pilot.click(offset=(rng.randrange(size[0]), rng.randrange(size[1])))
            else:
                key = rng.choice(keys)
                await pilot.press(key)
                if key in ("ctrl+p", "escape"):
                    # the palette opened or dismissed settles first: textual's own search
                    # worker queries its list after a dismissal that races it (NoMatches
                    # 'CommandList', seen under load), which is textual's, not memtui's
                    await pilot.pause()
            if step % 25 == 0:
                await pilot.pause()
            assert app.return_code is None, f"the app ended at step {step} (seed {seed})"
        await pilot.pause()
    assert app.crash is None, f"seed {seed}: {app.crash!r}"


@pytest.mark.slow
async def test_monkey_on_the_demo_capture():
    await _monkey(MemtuiApp(DEMO), SEED)


@pytest.mark.slow
async def test_monkey_on_a_capture_with_hostile_names():
    await _monkey(MemtuiApp(hostile_trace()), SEED + 1)


def test_the_monkey_knows_the_keys():
    keys = every_key()
    assert {"ctrl+p", "p", "z", "Z", "d", "slash", "m", "tab"} <= set(keys)
    assert "q" not in keys
