"""What ``--help`` says is true of this machine (issue 35, item 10)."""

from __future__ import annotations

import pytest

from memtui.cli import main


@pytest.mark.parametrize("command", ["", "summary", "findings", "compare", "check", "report",
                                     "export"])
def test_no_cache_names_the_cache_folder_in_use(command, tmp_path, monkeypatch, capsys):
    """``--no-cache``'s help names $XDG_CACHE_HOME's folder, not a fixed ``~/.cache``."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "elsewhere"))
    with pytest.raises(SystemExit):
        main([*([command] if command else []), "--help"])
    said = "".join(capsys.readouterr().out.split())  # argparse wraps long paths
    assert f"reopencache({tmp_path / 'elsewhere' / 'memtui'})" in said
    assert "~/.cache" not in said
