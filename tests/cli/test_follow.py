"""``memtui --follow`` on the command line: what cannot be followed gets the one-line error
and exit status 2 before any UI starts."""

from __future__ import annotations

from memtui.cli import main


def test_follow_needs_one_path(capsys):
    assert main(["--follow"]) == 2
    assert "needs one PATH" in capsys.readouterr().err
    assert main(["-f", "a.db", "b.db"]) == 2


def test_follow_what_cannot_be_followed(tmp_path, capsys):
    assert main(["-f", str(tmp_path / "missing.db")]) == 2
    assert "no such file" in capsys.readouterr().err
    notes = tmp_path / "notes.txt"
    notes.write_text("not a capture\n")
    assert main(["--follow", str(notes)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--follow reads msMemScope DBs" in err


def test_rank_goes_with_follow(tmp_path, capsys):
    assert main(["--rank", "1", str(tmp_path)]) == 2
    assert "--rank: goes with --follow" in capsys.readouterr().err
    snapshot = tmp_path / "one.pickle"
    snapshot.write_bytes(b"")
    assert main(["-f", "--rank", "1", str(snapshot)]) == 2
    assert "picks a rank of a folder" in capsys.readouterr().err
