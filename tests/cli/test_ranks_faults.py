"""Rank folders with links, and rank workers that die (issue 27, points 8 and 9)."""

from __future__ import annotations

import os
import shutil
import threading

from memtui.rankload import LOST, _pool_results
from memtui.sources.ranks import discover_ranks
from tests.helpers.dying_worker import summarize_or_die
from tests.helpers.rank_folders import write_ranks


def test_a_link_loop_in_a_ranks_folder_adds_no_rank(tmp_path):
    folder = write_ranks(tmp_path / "run", 2)
    (folder / "again").symlink_to(".", target_is_directory=True)
    (folder / "deeper").mkdir()
    (folder / "deeper" / "up").symlink_to("..", target_is_directory=True)
    captures = discover_ranks([folder]).captures
    assert [(c.rank, c.path.name) for c in captures] == [(0, "rank0.pickle"),
                                                         (1, "rank1.pickle")]


def test_a_second_name_for_a_rank_is_not_another_rank(tmp_path):
    folder = write_ranks(tmp_path / "run", 2)
    (folder / "latest.pickle").symlink_to("rank1.pickle")
    captures = discover_ranks([folder]).captures
    assert [(c.rank, c.path.name) for c in captures] == [(0, "rank0.pickle"),
                                                         (1, "rank1.pickle")]


def test_the_same_file_given_twice_is_one_rank(tmp_path):
    folder = write_ranks(tmp_path / "run", 2)
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "r1.pickle").symlink_to(folder / "rank1.pickle")
    captures = discover_ranks([folder / "rank1.pickle", other / "r1.pickle", folder]).captures
    assert sorted(c.path.name for c in captures) == ["rank0.pickle", "rank1.pickle"]


def test_a_killed_worker_loses_only_its_rank(tmp_path):
    folder = write_ranks(tmp_path / "run", 4)
    shutil.copy(folder / "rank2.pickle", folder / "killed_rank9.pickle")
    captures = discover_ranks([folder]).captures
    results = list(_pool_results(captures, 2, 16, threading.Event(), work=summarize_or_die))
    assert sorted(r.capture.path.name for r in results) == sorted(c.path.name for c in captures)
    errors = {r.capture.path.name: r.error for r in results if r.error}
    assert list(errors) == ["killed_rank9.pickle"]
    assert LOST in errors["killed_rank9.pickle"]
    assert all(r.rows for r in results if not r.error)


def test_summary_of_a_folder_prints_the_ranks_that_finished(tmp_path, monkeypatch, capsys):
    from memtui import rankload
    from memtui.cli import main

    folder = write_ranks(tmp_path / "run", 3)
    shutil.copy(folder / "rank2.pickle", folder / "killed_rank7.pickle")
    real = rankload._pool_results
    monkeypatch.setattr(rankload, "_pool_results",
                        lambda *a, **k: real(*a, **k, work=summarize_or_die))
    monkeypatch.setenv("MEMTUI_NO_CACHE", "1")
    code = main(["summary", str(folder), "--workers", "2"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Traceback" not in captured.err + captured.out
    assert "rank0.pickle" in captured.out and "rank1.pickle" in captured.out
    assert "killed_rank7.pickle" in captured.out + captured.err
    assert "worker process died" in captured.out + captured.err
    os.environ.pop("MEMTUI_NO_CACHE", None)
