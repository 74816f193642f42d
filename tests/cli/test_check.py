"""``memtui check`` (issue 24): limits, a baseline, exit status, JUnit XML, annotations.

The captures are hand-made snapshots whose figures are known: the loop of
``tests/helpers/compare_traces.py`` (peak = forward + backward = 6 MiB; a leak of 1 MiB
per step from ``log_metrics``; a forward 10% larger) and the hand snapshot of
``tests/helpers/hand_snapshot.py`` (an OOM of 2 KiB at t=11 us).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from memtui.analysis.limits.check import Limits, parse_size
from memtui.cli import main
from tests.helpers.compare_traces import MiB, write_loop
from tests.helpers.hand_snapshot import write_hand_snapshot

#: 10% more forward bytes: the peak goes from 6 MiB to 6 MiB + 629,146 B (+10.0%).
GROWN_FORWARD = 4 * MiB + 629_146


@pytest.fixture
def captures(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no pyproject.toml above: only the command line's limits
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    return {
        "clean": write_loop(tmp_path / "clean.pickle", steps=6),
        "leak": write_loop(tmp_path / "leak.pickle", steps=8, leak=MiB),
        "grown": write_loop(tmp_path / "grown.pickle", steps=6, forward=GROWN_FORWARD),
        "oom": write_hand_snapshot(tmp_path / "oom.pickle"),
    }


def run(capsys, *argv):
    code = main(["check", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("text, expected", [
    ("512MiB", 512 * MiB), ("2.5 GiB", int(2.5 * (1 << 30))), ("1e9", 10**9),
    ("0 B", 0), ("0", 0), ("4096", 4096), ("1.5k", 1536), ("3GB", 3 * 10**9), (7, 7),
])
def test_sizes_are_read_as_people_write_them(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "12QB", "-1MiB", "1e999", "GiB", "nan", True])
def test_what_is_no_size_is_refused(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_a_clean_capture_passes(captures, capsys):
    code, out, _ = run(capsys, captures["clean"], "--max-peak", "6MiB",
                       "--max-leak-per-step", "0", "--max-end", "0")
    assert code == 0
    assert out.startswith("PASS: ")
    assert "4 of 4 limits hold" in out  # max_peak, max_end, leak, oom


def test_a_peak_over_its_limit_fails_with_the_figure_and_the_stack(captures, capsys):
    code, out, _ = run(capsys, captures["clean"], "--max-peak", "5.5 MiB")
    assert code == 1
    assert out.startswith("FAIL: ")
    assert "max_peak: peak allocated 6.0 MiB > --max-peak 5.5 MiB" in out
    assert "forward (/home/u/model.py:10)" in out  # 4 of the 6 MiB at the peak
    assert "in ProfilerStep#0" in out  # every step peaks alike: the first


def test_a_planted_leak_fails_by_default_and_over_its_limit(captures, capsys):
    code, out, _ = run(capsys, captures["leak"])
    assert code == 1
    assert "leak: log_metrics (train.py:60) leaks 1.0 MiB per step" in out
    assert "no leak of high severity" in out
    assert "log_metrics (/home/u/train.py:60)" in out and "in ProfilerStep#0" in out
    # under a generous limit it holds; under 1 MiB - 1 B it breaks
    assert run(capsys, captures["leak"], "--max-leak-per-step", "2MiB")[0] == 0
    code, out, _ = run(capsys, captures["leak"], "--max-leak-per-step", str(MiB - 1))
    assert code == 1 and "no leak over --max-leak-per-step" in out


def test_a_planted_oom_fails_unless_allowed(captures, capsys):
    code, out, _ = run(capsys, captures["oom"])
    assert code == 1
    assert "oom: out of memory asking 2.0 KiB" in out
    assert run(capsys, captures["oom"], "--allow-oom")[0] == 0


def test_a_ten_percent_peak_regression_against_the_baseline_fails(captures, capsys):
    code, out, _ = run(capsys, captures["grown"], "--baseline", captures["clean"])
    assert code == 1
    assert ("baseline_peak: peak allocated 6.6 MiB against the baseline's 6.0 MiB "
            "(+10.0%, tolerance 5%)") in out
    assert "forward (/home/u/model.py:10)" in out  # the stack that grew
    assert "+614.4 KiB" in out
    # within a 10.5% tolerance it holds; the baseline against itself holds
    assert run(capsys, captures["grown"], "--baseline", captures["clean"],
               "--tolerance", "10.5")[0] == 0
    assert run(capsys, captures["clean"], "--baseline", captures["clean"])[0] == 0


def test_a_new_leak_and_a_new_oom_against_the_baseline(captures, capsys):
    code, out, _ = run(capsys, captures["leak"], "--baseline", captures["clean"],
                       "--max-leak-per-step", "2MiB", "--tolerance", "1000")
    assert code == 1
    assert "baseline_leak: new leak: log_metrics (train.py:60)" in out
    code, out, _ = run(capsys, captures["oom"], "--baseline", captures["oom"])
    assert "baseline_oom" not in out.split("\n", 1)[1]  # the same OOM as the baseline's


def test_junit_has_one_case_per_limit_and_fails_the_broken_ones(captures, capsys, tmp_path):
    report = tmp_path / "check.xml"
    code, _, _ = run(capsys, captures["grown"], "--baseline", captures["clean"],
                     "--max-peak", "1GiB", "--junit", report)
    assert code == 1
    suite = ET.parse(report).getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert set(cases) == {f"{name} [cuda:0]" for name in (
        "max_peak", "leak", "oom", "baseline_peak", "baseline_reserved", "baseline_end",
        "baseline_leak", "baseline_oom")}
    failed = {name for name, case in cases.items() if case.find("failure") is not None}
    assert failed == {"baseline_peak [cuda:0]"}
    assert suite.get("failures") == "1" and suite.get("tests") == "8"
    failure = cases["baseline_peak [cuda:0]"].find("failure")
    assert "6.6 MiB" in failure.get("message") and "model.py:10" in failure.text


def test_github_actions_gets_one_error_annotation_per_broken_limit(captures, capsys,
                                                                   monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    code, out, _ = run(capsys, captures["oom"], "--max-peak", "1KiB")
    assert code == 1
    errors = [line for line in out.splitlines() if line.startswith("::error ")]
    assert len(errors) == 2
    assert errors[0].startswith("::error title=memtui check%3A max_peak [cuda%3A0]::")
    assert "%0A" in errors[0] and "\r" not in errors[0]
    assert any("oom [cuda%3A0]::out of memory asking 2.0 KiB" in e for e in errors)
    monkeypatch.delenv("GITHUB_ACTIONS")
    assert "::error" not in run(capsys, captures["oom"])[1]


def test_json_is_the_api_result(captures, capsys):
    import memtui

    code, out, _ = run(capsys, captures["leak"], "--json", "--max-peak", "1GiB")
    data = json.loads(out)
    assert code == 1 and data["passed"] is False
    expected = memtui.open(captures["leak"]).check(max_peak="1GiB").to_dict()
    assert data == expected
    leak = next(r for r in data["results"] if r["limit"] == "leak")
    assert leak["status"] == "fail" and leak["figure"] == MiB
    assert leak["evidence"]["stack"][0]["name"] == "log_metrics"


def test_limits_from_pyproject_with_the_command_line_over_them(captures, capsys, tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.memtui.check]\nmax-peak = "5 MiB"\n'
        'baseline = "clean.pickle"\ntolerance = 20\n')
    code, out, _ = run(capsys, captures["grown"])
    assert code == 1
    assert "--max-peak 5.0 MiB" in out and "against" in out.splitlines()[0]
    assert "baseline_peak" not in out  # within its 20% tolerance
    assert run(capsys, captures["grown"], "--max-peak", "7MiB")[0] == 0
    code, out, _ = run(capsys, captures["grown"], "--max-peak", "7MiB", "--tolerance", "5")
    assert code == 1 and "baseline_peak" in out


@pytest.mark.parametrize("config, problem", [
    ("[tool.memtui.check]\nmax-peek = 1\n", "unknown key 'max-peek'"),
    ("[tool.memtui.check]\nmax-peak = \"lots\"\n", "not a size: 'lots'"),
    ("[tool.memtui.check\n", "not valid TOML"),
])
def test_a_bad_pyproject_is_one_line_and_exit_2(captures, capsys, tmp_path, config,
                                                 problem):
    (tmp_path / "pyproject.toml").write_text(config)
    code, out, err = run(capsys, captures["clean"])
    assert code == 2 and out == ""
    assert err.startswith(f"memtui: {tmp_path / 'pyproject.toml'}: ") and problem in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("argv, problem", [
    (["--max-peak", "12QB"], "--max-peak: not a size: '12QB'"),
    (["--tolerance", "lots"], "--tolerance: tolerance must be a percentage"),
    (["--baseline", "missing.pickle"], "missing.pickle"),
    (["--junit", "/no/such/folder/x.xml"], "its folder /no/such/folder does not exist"),
])
def test_bad_options_are_one_line_and_exit_2(captures, capsys, argv, problem):
    code, out, err = run(capsys, captures["clean"], *argv)
    assert code == 2
    assert err.startswith("memtui: ") and problem in err and err.count("\n") == 1


def test_limits_read_both_spellings_and_refuse_unknown_ones():
    limits = Limits.from_mapping({"max-peak": "1 KiB", "max_end": 5, "tolerance": "7%"})
    assert (limits.max_peak, limits.max_end, limits.tolerance) == (1024, 5, 7.0)
    with pytest.raises(ValueError, match="unknown limit"):
        Limits.from_mapping({"max-peek": 1})


def test_an_annotation_points_at_the_file_of_its_stack_in_the_workspace(captures, capsys,
                                                                         monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", "/home/u")  # the loop's frames live there
    code, out, _ = run(capsys, captures["leak"], "--json")
    assert code == 1
    json.loads(out)  # with --json the annotations go to stderr, the JSON stays whole
    _, _, err = run(capsys, captures["leak"], "--json")
    error = next(line for line in err.splitlines() if line.startswith("::error "))
    assert error.startswith("::error file=train.py,line=60,title=memtui check%3A leak")
