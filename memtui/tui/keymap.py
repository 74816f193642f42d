"""Keys people can change: the user's keymap file, applied with Textual's ``App.set_keymap``.

Every binding of the app and its screens has an id (``app.peak``, ``blocks.detail_1``,
``tables.sort``...; the help lists them).  ``$XDG_CONFIG_HOME/memtui/keymap.toml``
(``~/.config/memtui/keymap.toml`` by default) maps ids to keys::

    "app.peak" = "P"
    "app.quit" = ["q", "ctrl+q"]
    [keys]                      # the same, in a table, if you prefer
    "tables.sort" = "o"

A key string may list several keys separated by commas.  A file that cannot be read is
reported once in the UI and otherwise ignored; so is an entry that would take the key of
Quit or Help away from it (:func:`keep_quit_and_help`: the user could no longer leave, or
learn the keys), and one whose id no binding has (:func:`unknown_ids`, said just after the
first paint: knowing every id imports every screen).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path


def keymap_path() -> Path:
    """Where the user's keymap lives ($XDG_CONFIG_HOME, else ~/.config)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "memtui" / "keymap.toml"


def load_keymap(path: Path | None = None) -> tuple[dict[str, str], str | None]:
    """(binding id -> keys, a problem to show or None).  No file: an empty keymap."""
    path = keymap_path() if path is None else path
    if not path.is_file():
        return {}, None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return {}, f"{path}: not read ({exc}); the default keys apply"
    table = data.get("keys", {}) if isinstance(data.get("keys"), dict) else {}
    entries = {**{k: v for k, v in data.items() if k != "keys"}, **table}
    keymap: dict[str, str] = {}
    bad = []
    for binding_id, keys in entries.items():
        if isinstance(keys, str) and keys.strip():
            keymap[binding_id] = keys.replace(" ", "")
        elif isinstance(keys, list) and keys and all(isinstance(k, str) for k in keys):
            keymap[binding_id] = ",".join(k.strip() for k in keys)
        else:
            bad.append(binding_id)
    problem = f"{path}: ignored {', '.join(bad)} (keys must be text)" if bad else None
    return keymap, problem


#: Bindings a keymap never takes a key from: without them one cannot leave or learn the keys.
KEPT = ("app.quit", "app.help")


def keep_quit_and_help(keymap: dict[str, str],
                       defaults: dict[str, str]) -> tuple[dict[str, str], str | None]:
    """(``keymap`` less the entries that would take a key of Quit or Help, a problem to
    show or None).  ``defaults``: binding id -> default keys, with those of :data:`KEPT`
    (the app's own bindings).  A key given to another binding is taken from the one that
    had it (Textual's keymap), so such an entry is dropped; Quit and Help moved to other
    keys free theirs."""
    from textual.keys import _normalize_key_list

    def keys(value: str) -> set[str]:
        return set(_normalize_key_list(value).split(","))

    kept = {binding_id: keys(keymap.get(binding_id, defaults[binding_id]))
            for binding_id in KEPT if binding_id in defaults}
    taking = {}
    for binding_id, value in keymap.items():
        owner = next((k for k, taken in kept.items() if keys(value) & taken), None)
        if binding_id not in KEPT and owner is not None:
            taking[binding_id] = f"ignored {binding_id} = {value!r}: {owner} keeps its key"
    checked = {k: v for k, v in keymap.items() if k not in taking}
    return checked, "; ".join(taking.values()) or None


def unknown_ids(keymap: dict[str, str], known: set[str]) -> str | None:
    """The problem of the ids of ``keymap`` no binding has (a typo, a binding renamed),
    None where there is none: the keymap ignores them, the user should know."""
    unknown = sorted(set(keymap) - known)
    if not unknown:
        return None
    return (f"ignored {', '.join(unknown)}: no binding has "
            f"{'that id' if len(unknown) == 1 else 'those ids'} (? lists them)")


def binding_defaults(app_class: type) -> dict[str, str]:
    """Every binding id of ``app_class`` and of the screens and widgets memtui has, with its
    default keys (imports every screen module: only asked for where a keymap exists)."""
    from textual.binding import Binding
    from textual.dom import DOMNode

    from memtui.tui.screens import SCREENS

    for name in SCREENS:
        SCREENS[name]  # noqa: B018 - imports the screen's module, its widgets with it
    classes, found = [app_class, DOMNode], {}
    while classes:
        cls = classes.pop()
        classes.extend(cls.__subclasses__())
        if cls is not app_class and not cls.__module__.startswith("memtui."):
            continue
        for binding in getattr(cls, "BINDINGS", []):
            if isinstance(binding, Binding) and binding.id:
                found.setdefault(binding.id, binding.key)
    return found


__all__ = ["KEPT", "binding_defaults", "keep_quit_and_help", "keymap_path", "load_keymap",
           "unknown_ids"]
