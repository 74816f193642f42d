"""Held-out probes of issue 31's edges that found something: each case failed before its fix.

* an empty path (``memtui check "$CAPTURE"`` with the variable unset) was the demo for
  ``summary``/``findings``/``state``/``whatif``/the UI and the current folder for ``check``,
  ``memtui.open``, ranks and ``--follow``: a verdict on a capture nobody named.  It is one
  line, exit status 2, and nothing opened;
* a folder whose capture lies more than 5 levels down, or behind a link to a folder, said
  "nothing in it is a format memtui reads": it says what the walk passed over;
* ``compare --top -1`` printed every row but the last: a count below 0 is refused;
* ``memtui findings`` printed every finding (2,000 OOMs: 4,000 lines into a CI log): it
  lists 50 a device, each kind's first among them, and says how many more.
"""

from __future__ import annotations

import pytest

import memtui
from memtui.cli import main
from tests.helpers.hostile_files import write_hostile_snapshot


def refused(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1 and "Traceback" not in lines[0], captured
    return lines[0]


@pytest.mark.parametrize("argv", [
    ["summary", ""], ["findings", ""], ["state", ""], ["whatif", ""], ["check", ""],
    ["check", "", "--max-peak", "1GiB"], ["report", "", "-o", "{out}/r.html"],
    ["export", "", "--to", "perfetto", "-o", "{out}/e.json"], ["compare", "", "{cap}"],
    ["compare", "{cap}", ""], ["summary", "", "{cap}"], ["summary", "--ranks", ""],
    ["-f", ""], ["", "{cap}", "{cap}"],
])
def test_an_empty_path_is_refused_not_the_demo_or_the_folder(tmp_path, capsys, monkeypatch,
                                                               argv):
    cap = write_hostile_snapshot(tmp_path / "cap.pickle")
    monkeypatch.chdir(tmp_path)  # "." holds a capture: opening it would succeed
    line = refused(capsys, [a.format(out=tmp_path, cap=cap) for a in argv])
    assert "an empty path" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cap.pickle"]


def test_the_api_refuses_an_empty_path(tmp_path, monkeypatch):
    write_hostile_snapshot(tmp_path / "cap.pickle")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(memtui.CaptureError, match="an empty path"):
        memtui.open("", use_cache=False)


def test_a_folder_whose_capture_lies_too_deep_says_so(tmp_path, capsys):
    """The walk stops 5 levels down: "nothing in it is a format memtui reads" was untrue of
    a folder whose capture lies deeper, or behind a link to a folder (not followed)."""
    deep = tmp_path / "deep" / "1" / "2" / "3" / "4" / "5" / "6"
    deep.mkdir(parents=True)
    write_hostile_snapshot(deep / "cap.pickle")
    line = refused(capsys, ["summary", str(tmp_path / "deep")])
    assert "more than 5 levels down not looked into" in line, line
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / "run").symlink_to(deep, target_is_directory=True)
    line = refused(capsys, ["findings", str(tmp_path / "linked")])
    assert "link(s) to folders not followed" in line, line


@pytest.mark.parametrize("top", ["-1", "-5"])
def test_compare_refuses_a_negative_top(tmp_path, capsys, top):
    """``--top -1`` printed every row but the last (a Python slice), silently."""
    cap = write_hostile_snapshot(tmp_path / "cap.pickle")
    with pytest.raises(SystemExit) as stop:
        main(["compare", str(cap), str(cap), "--top", top])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "--top" in err and "0 or more" in err, err


def test_findings_text_lists_fifty_a_device_and_each_kind(tmp_path, capsys):
    """120 OOM events printed 240 lines of findings (2,000 printed 4,000 into a CI log):
    the text lists 50 of a device, each kind's first among them, and says how many more;
    ``--json`` still lists every one."""
    import json
    import pickle

    from tests.helpers.hostile_files import hostile_snapshot

    snapshot = hostile_snapshot()
    trace = snapshot["device_traces"][0]
    oom = trace[-1]
    trace += [{**oom, "time_us": oom["time_us"] + k, "size": oom["size"] + k}
              for k in range(1, 120)]
    path = tmp_path / "ooms.pickle"
    path.write_bytes(pickle.dumps(snapshot, protocol=4))
    assert main(["findings", str(path), "--json"]) == 0
    every = json.loads(capsys.readouterr().out)["devices"][0]["findings"]
    kinds = {f["kind"] for f in every}
    assert len(every) > 120 and {"oom", "leak"} <= kinds
    assert main(["findings", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    listed = [line.split("] ", 1)[1].split(":")[0] for line in out if line.startswith("    [")]
    assert len(listed) == 50 and set(listed) == kinds
    assert out[-1] == f"    ... and {len(every) - 50:,} more findings on cuda:0 " \
                      "(--json lists every one)"
