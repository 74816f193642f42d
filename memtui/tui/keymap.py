"""Keys people can change: the user's keymap file, applied with Textual's ``App.set_keymap``.

Every binding of the app and its screens has an id (``app.peak``, ``blocks.detail_1``,
``tables.sort``...; the help lists them).  ``$XDG_CONFIG_HOME/memtui/keymap.toml``
(``~/.config/memtui/keymap.toml`` by default) maps ids to keys::

    "app.peak" = "P"
    "app.quit" = ["q", "ctrl+q"]
    [keys]                      # the same, in a table, if you prefer
    "tables.sort" = "o"

A key string may list several keys separated by commas.  A file that cannot be read is
reported once in the UI and otherwise ignored.
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


__all__ = ["keymap_path", "load_keymap"]
