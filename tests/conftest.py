"""Shared test fixtures: where the real captures of ../shared/data are, skipping without them."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


def shared_files(folder: str, pattern: str = "*") -> list[Path]:
    """Files of ../shared/data/FOLDER matching PATTERN (empty where ../shared is absent)."""
    base = SHARED_DATA / folder
    if not base.is_dir():
        return []
    return sorted(p for p in base.glob(pattern) if p.is_file() and not p.name.endswith(".md"))


def require_shared(folder: str) -> Path:
    """The folder ../shared/data/FOLDER, or skip the test saying why."""
    base = SHARED_DATA / folder
    if not base.is_dir():
        pytest.skip(f"{base} is absent: the real captures live beside the checkout, not in it")
    return base


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Every test gets its own empty reopen cache: nothing is written to ~/.cache, and no
    test sees what another stored (subprocesses inherit the variable)."""
    root = tmp_path_factory.mktemp("xdg_cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(root))
    monkeypatch.delenv("MEMTUI_NO_CACHE", raising=False)
    return root / "memtui"
