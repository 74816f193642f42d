"""Issue 31 item 4: no string from a file reaches a terminal, a CI log or a page raw.

Captures whose every string is hostile (:mod:`tests.helpers.hostile_files`: frame and file
names, step and mark names, msMemScope owners and op names, profiler operator names, and
the files' own names carry newlines, ESC, CR, BEL, NUL, bidi overrides, U+2028 and
``::``) go through every command's every text output: ``summary`` (and its reopened
form), ``findings`` (``--stacks``), ``state``, ``compare``, ``check`` (its text, the
GitHub annotations and the JUnit file), ``report`` (the page's text and ``<title>``),
``export`` (the Perfetto JSON, Parquet's meta.json), ``whatif``, ``cache``, several
ranks.  Each output is scanned (:func:`tests.helpers.hostile_files.scan`): no raw control,
format or separator character, and no line a CI runner reads as a workflow command but
``check``'s own annotations, each one whole line.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import memtui
from memtui.cli import main
from memtui.errors import safe_line, safe_text
from tests.helpers.hostile_files import (
    HOSTILE,
    scan,
    write_hostile_memscope,
    write_hostile_profiler,
    write_hostile_snapshot,
)

#: A file name a neighbour could choose (the path shows in every output's first line).
EVIL_NAME = "run\x1b]0;t\x07\u202e\n::warning::NAME"
#: One of check's own annotations: ``::error`` with escaped properties, then the message.
ANNOTATION = re.compile(r"::error(?: [^:\s][^:]*)?::[^\r\n]*")


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    room = tmp_path_factory.mktemp("hostile")
    ranks = room / "ranks"
    ranks.mkdir()
    return {
        "snapshot": write_hostile_snapshot(room / f"{EVIL_NAME}.pickle"),
        "clean": write_hostile_snapshot(room / "no_leak.pickle", leak=0),
        "memscope": write_hostile_memscope(room / f"memscope_dump_{EVIL_NAME}.db"),
        "profiler": write_hostile_profiler(room),
        "rank0": write_hostile_snapshot(ranks / "rank0\n::error::R.pickle"),
        "rank1": write_hostile_snapshot(ranks / "rank1\u202e.pickle", leak=0),
        "ranks": ranks,
        "room": room,
    }


def _annotations_allowed(text: str) -> str:
    """``text`` without check's own annotation lines, each checked to be one whole
    annotation (its properties escaped: nothing can start a second command)."""
    kept = []
    for line in text.split("\n"):
        if line.startswith("::error "):
            assert ANNOTATION.fullmatch(line), line
            continue
        kept.append(line)
    return "\n".join(kept)


def run(capsys, argv, monkeypatch=None) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, out.out + out.err


CAPTURES = ["snapshot", "memscope", "profiler"]
COMMANDS = {
    "summary": lambda p: [["summary", p], ["summary", p], ["summary", p, "--json"]],
    "findings": lambda p: [["findings", p], ["findings", p, "--stacks"],
                           ["findings", p, "--json", "--stacks"]],
    "state": lambda p: [["state", p], ["state", p, "--event", "peak"], ["state", p, "--json"]],
    "check": lambda p: [["check", p, "--max-peak", "1KiB", "--max-end", "0",
                         "--max-leak-per-step", "0"]],
    "whatif": lambda p: [["whatif", p], ["whatif", p, "--set", "expandable_segments:True"]],
}


@pytest.mark.parametrize("capture", CAPTURES)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_text_output_is_safe(files, capsys, monkeypatch, capture, command):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", "/home/u")
    for argv in COMMANDS[command](files[capture]):
        code, text = run(capsys, argv)
        assert code in (0, 1, 2), (argv, code)
        assert scan(_annotations_allowed(text)) == [], (argv, text[:2000])


def test_check_annotations_and_junit_are_safe(files, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", "/home/u")  # the hostile frames' files lie there
    junit = tmp_path / "j.xml"
    code, text = run(capsys, ["check", files["snapshot"], "--max-peak", "1KiB",
                              "--max-leak-per-step", "0", "--junit", junit])
    assert code == 1
    annotations = [line for line in text.split("\n") if line.startswith("::")]
    assert len(annotations) >= 2 and all(ANNOTATION.fullmatch(a) for a in annotations)
    assert any(" file=" in a for a in annotations)  # a file= property, escaped
    assert scan(_annotations_allowed(text)) == []
    xml = junit.read_text(encoding="utf-8")
    assert scan(xml) == [] and ET.fromstring(xml).tag == "testsuites"


def test_compare_is_safe(files, capsys):
    for argv in (["compare", files["clean"], files["snapshot"]],
                 ["compare", files["snapshot"], files["clean"], "--json"],
                 ["compare", files["memscope"], files["memscope"]],
                 ["compare", files["profiler"], files["profiler"]]):
        code, text = run(capsys, argv)
        assert code == 0 and scan(text) == [], (argv, text[:2000])


def test_report_page_and_title_are_safe(files, capsys, tmp_path):
    for name, argv in (("one", [files["snapshot"]]),
                       ("two", [files["clean"], files["snapshot"]]),
                       ("memscope", [files["memscope"]]),
                       ("profiler", [files["profiler"]])):
        out = tmp_path / f"{name}.html"
        code, text = run(capsys, ["report", *argv, "-o", out])
        assert code == 0 and scan(text) == [], text
        page = out.read_text(encoding="utf-8")
        assert scan(page) == [], (name, scan(page)[:5])
        title = re.search(r"<title>(.*?)</title>", page, re.S).group(1)
        assert scan(title, newlines=False) == []
        assert "\\x1b" in page  # the escape is shown, not dropped


def test_exports_are_safe(files, capsys, tmp_path):
    for capture in CAPTURES:
        out = tmp_path / f"{capture}.json"
        code, text = run(capsys, ["export", files[capture], "--to", "perfetto", "-o", out])
        assert code == 0 and scan(text) == []
        body = out.read_text(encoding="utf-8")
        assert scan(body) == [] and json.loads(body)["traceEvents"]
        folder = tmp_path / f"{capture}_parquet"
        code, text = run(capsys, ["export", files[capture], "--to", "parquet", "-o", folder])
        assert code == 0 and scan(text) == []
        assert scan((folder / "meta.json").read_text(encoding="utf-8")) == []


def test_ranks_are_safe(files, capsys):
    for argv in (["summary", files["ranks"], "--workers", "1"],
                 ["summary", files["rank0"], files["rank1"], "--workers", "1", "--json"]):
        code, text = run(capsys, argv)
        assert code == 0 and scan(text) == [], text


def test_cache_output_is_safe(files, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache\x1b[2J\n::error::C"))
    run(capsys, ["summary", files["snapshot"]])
    for argv in (["cache", "info"], ["cache", "clear"]):
        code, text = run(capsys, argv)
        assert code == 0 and scan(text) == [], text


def test_bad_input_named_by_a_hostile_path_is_one_safe_line(files, capsys):
    bad = files["room"] / "bad\n::error::X\u202e.pickle"
    bad.write_bytes(b"\x80\x04not a pickle")
    code, text = run(capsys, ["summary", bad])
    assert code == 2 and text.count("\n") == 1 and scan(text) == []


def test_the_api_text_and_titles_are_safe(files):
    capture = memtui.open(files["snapshot"])
    assert scan(capture.summary().text()) == []
    assert scan(capture.findings(stacks=True).text()) == []
    assert scan(capture.state().text()) == []
    assert scan(capture.check(max_peak="1KiB").text()) == []
    for finding in capture.findings().all():
        assert scan(finding.title, newlines=False) == []


@pytest.mark.parametrize("text", HOSTILE)
def test_a_safe_line_is_one_line_never_a_command(text):
    line = safe_line(text)
    assert "\n" not in line and scan(line) == []
    assert scan(safe_text([text, f"  {text}", "ok"])) == []


@pytest.mark.parametrize("name", ["::warning title=x::N.pickle", "##vso[task.x]N.pickle",
                                  "  ::error::N.pickle"])
def test_a_file_name_that_starts_a_line_is_escaped(files, capsys, name, monkeypatch):
    """The path begins the first line of summary (its reopened form too), findings and
    the rest: a name starting with ``::`` or ``##`` must not start an output line."""
    path = files["room"] / name
    path.write_bytes(files["snapshot"].read_bytes())
    monkeypatch.chdir(files["room"])
    for argv in (["summary", name], ["summary", name], ["findings", name], ["state", name],
                 ["check", name, "--max-peak", "1KiB"], ["compare", name, name],
                 ["whatif", name]):
        code, text = run(capsys, argv)
        assert code in (0, 1, 2) and scan(text) == [], (argv, text[:500])
