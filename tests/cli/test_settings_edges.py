"""Issue 31 item 7: settings of any shape are one line, a huge tolerance never overflows.

``[tool.memtui.check]`` is read by :mod:`memtui.settings`: a ``tool`` or ``tool.memtui`` that
is not a table, a setting given in both spellings, a baseline that is no path, end as one
line naming the file (exit 2); ``--tolerance 1e308`` (command line, pyproject, the API) is
a verdict, not an ``OverflowError``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memtui
from memtui.analysis.limits.check import MAX_BOUND, Limits, grown_bound
from memtui.cli import main
from memtui.errors import CaptureError
from memtui.settings import dashed_keys, read_settings, tool_section
from tests.helpers.compare_traces import MiB, write_loop


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    write_loop(tmp_path / "loop.pickle", steps=6)
    write_loop(tmp_path / "grown.pickle", steps=6, forward=5 * MiB)
    return tmp_path


BAD_PYPROJECTS = [
    ("[tool]\nmemtui = 1\n", "[tool.memtui] must be a table, not a number"),
    ('tool = "x"\n', "[tool] must be a table, not a string"),
    ("[tool.memtui]\ncheck = [1]\n", "[tool.memtui.check] must be a table, not an array"),
    ('[tool.memtui]\ncheck = "max-peak"\n', "[tool.memtui.check] must be a table"),
    ('[tool.memtui.check]\nmax_peak = "1GiB"\nmax-peak = "2GiB"\n',
     "'max_peak' and 'max-peak' are the same setting"),
    ("[tool.memtui.check]\nbaseline = 3\n", "baseline must be the path of a capture"),
    ('[tool.memtui.check]\nbaseline = ""\n', "baseline must be the path of a capture"),
    ("[tool.memtui.check]\nmax-peak = [1, 2]\n", "not a size"),
    ("[tool.memtui.check]\nallow-oom = 1\n", "allow-oom must be true or false"),
    ("[tool.memtui.check]\nnope = 1\n", "unknown key 'nope'"),
    ("[tool.memtui.check\n", "not valid TOML"),
]


@pytest.mark.parametrize("text, said", BAD_PYPROJECTS)
def test_a_pyproject_of_any_shape_is_one_line(folder, capsys, text, said):
    (folder / "pyproject.toml").write_text(text)
    assert main(["check", "loop.pickle", "--max-peak", "1GiB"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert said in err and "pyproject.toml" in err, err


def test_a_pyproject_that_is_not_utf8_is_one_line(folder, capsys):
    (folder / "pyproject.toml").write_bytes(b"[tool.memtui.check]\nmax-peak = '\xff'\n")
    assert main(["check", "loop.pickle"]) == 2
    assert "not UTF-8" in capsys.readouterr().err


def test_the_spellings_are_one_setting_in_the_api_too(folder):
    with pytest.raises(ValueError, match="same limit"):
        Limits.from_mapping({"max_peak": "1GiB", "max-peak": "2GiB"})
    with pytest.raises(CaptureError, match="same limit"):
        memtui.open(folder / "loop.pickle").check(limits={"max_peak": 1, "max-peak": 2})


@pytest.mark.parametrize("where", ["command line", "pyproject", "api"])
def test_a_huge_tolerance_is_a_verdict(folder, capsys, where):
    if where == "api":
        result = memtui.open(folder / "grown.pickle").check(folder / "loop.pickle",
                                                           tolerance=1e308)
        assert result.passed and result.exit_code == 0
        return
    argv = ["check", "grown.pickle", "--baseline", "loop.pickle"]
    if where == "pyproject":
        (folder / "pyproject.toml").write_text("[tool.memtui.check]\ntolerance = 1e308\n")
    else:
        argv += ["--tolerance", "1e308"]
    assert main(argv) == 0, capsys.readouterr()
    assert "PASS" in capsys.readouterr().out


def test_without_the_tolerance_the_grown_capture_fails(folder, capsys):
    """The capture above does break the default tolerance: the pass is the tolerance's."""
    assert main(["check", "grown.pickle", "--baseline", "loop.pickle"]) == 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(figure=st.integers(0, 2**62), tolerance=st.floats(0, 1e308, allow_nan=False))
def test_a_grown_bound_never_overflows(figure, tolerance):
    bound = grown_bound(figure, tolerance)
    assert isinstance(bound, int) and figure <= bound <= MAX_BOUND or bound == MAX_BOUND


toml_values = st.recursive(
    st.one_of(st.integers(), st.text(max_size=8), st.booleans(), st.floats(allow_nan=False)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=6)


@settings(max_examples=80, deadline=None)
@given(data=st.dictionaries(st.sampled_from(["tool", "other"]), toml_values, max_size=2))
def test_any_document_gives_a_table_or_one_error(data, tmp_path_factory):
    path = tmp_path_factory.mktemp("settings") / "pyproject.toml"
    try:
        table = tool_section(data, "check", path)
        dashed = dashed_keys(table, ["max-peak"], "check", path)
    except CaptureError as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(dashed, dict) and set(dashed) <= {"max-peak"}


def test_read_settings_returns_dashed_keys(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text('[tool.memtui.check]\nmax_peak = "1GiB"\nallow-oom = true\n')
    assert read_settings(path, "check", ["max-peak", "allow-oom"]) == {
        "max-peak": "1GiB", "allow-oom": True}
    path.write_text("[project]\nname = 'x'\n")
    assert read_settings(path, "check", ["max-peak"]) == {}
