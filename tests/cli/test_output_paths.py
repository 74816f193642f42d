"""Issue 31 items 3, 8 and 10: what ``report``, ``export`` and ``check --junit`` write.

Every output goes through :mod:`memtui.outputs`: a temporary created exclusively beside the
output (a link planted at any temporary name is never opened), renamed over it; an output
that is a link, a folder (``-o .``, ``-o /``, ``-o ""``), or one of the inputs (the
capture itself, a hard link to it) is refused in one line with exit status 2, before any
work.  The hypothesis test drives random output paths through the four writers and checks
what must always hold: exit 0 or 2 with one line, nothing written through a link, no
input changed, no temporary left behind, and a whole, valid output where it said it wrote.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtui.cli import main
from memtui.errors import CaptureError
from memtui.outputs import OutputFolder, output_file, output_folder, write_atomically
from tests.helpers.compare_traces import write_loop

TARGET_TEXT = "the neighbour's file\n"

#: command name -> the argv before ``-o``/``--junit OUT`` (CAP is the capture).
WRITERS = {
    "report": lambda cap: ["report", cap, "-o"],
    "perfetto": lambda cap: ["export", cap, "--to", "perfetto", "-o"],
    "parquet": lambda cap: ["export", cap, "--to", "parquet", "-o"],
    "junit": lambda cap: ["check", cap, "--max-peak", "1GiB", "--junit"],
}


@pytest.fixture
def room(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    write_loop(tmp_path / "cap.pickle", steps=4)
    (tmp_path / "target.txt").write_text(TARGET_TEXT)
    return tmp_path


def run(capsys, argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.err


def test_a_link_at_the_old_temporary_names_is_never_written_through(room, capsys):
    """The issue's probe: ``ln -s target.txt .r.json.tmp`` before an export; in an earlier
    Parquet export, links at its temporary names and at ``events.parquet`` itself."""
    assert run(capsys, WRITERS["parquet"]("cap.pickle") + ["out"])[0] == 0
    (room / "out" / "events.parquet").unlink()
    for name in (".r.json.tmp", ".r.html.tmp", "out/.events.parquet.tmp", "out/.meta.json.tmp",
                 ".j.xml.tmp", "out/events.parquet"):
        (room / name).symlink_to(room / "target.txt")
    for argv in (WRITERS["perfetto"]("cap.pickle") + ["r.json"],
                 WRITERS["report"]("cap.pickle") + ["r.html"],
                 WRITERS["parquet"]("cap.pickle") + ["out"],
                 WRITERS["junit"]("cap.pickle") + ["j.xml"]):
        assert run(capsys, argv)[0] == 0
    assert (room / "target.txt").read_text() == TARGET_TEXT
    assert json.loads((room / "r.json").read_text())["traceEvents"]
    assert not (room / "out" / "events.parquet").is_symlink()  # replaced, not written through
    assert pl.read_parquet(room / "out" / "events.parquet").height > 0


@pytest.mark.parametrize("writer", ["report", "perfetto", "junit"])
@pytest.mark.parametrize("output, said", [
    ("", "an empty output path"), (".", "is a folder"), ("/", "is a folder"),
    ("sub/", "is a folder"), ("cap.pickle", "is the input"), ("hard.bin", "is the input"),
    ("link", "is a symbolic link"), ("nosuch/x", "does not exist"),
])
def test_an_output_that_cannot_be_one_file_is_one_line(room, capsys, writer, output, said):
    (room / "sub").mkdir()
    os.link(room / "cap.pickle", room / "hard.bin")
    (room / "link").symlink_to(room / "target.txt")
    before = (room / "cap.pickle").read_bytes()
    code, err = run(capsys, WRITERS[writer]("cap.pickle") + [output])
    assert code == 2 and err.count("\n") == 1 and said in err, err
    assert (room / "cap.pickle").read_bytes() == before
    assert (room / "target.txt").read_text() == TARGET_TEXT


@pytest.mark.parametrize("output, said", [
    ("", "an empty output path"), ("cap.pickle", "is not a folder"),
    ("link", "is a symbolic link"), ("target.txt", "is not a folder"),
])
def test_a_parquet_folder_that_cannot_be_one_is_one_line(room, capsys, output, said):
    (room / "link").symlink_to(room, target_is_directory=True)
    code, err = run(capsys, WRITERS["parquet"]("cap.pickle") + [output])
    assert code == 2 and err.count("\n") == 1 and said in err, err
    assert not list(room.glob("*.parquet"))


def test_a_parquet_folder_is_new_empty_or_an_earlier_export(room, capsys):
    """``-o .`` in a folder of other files (a home folder, ``/``) never replaces them;
    an earlier export is written again."""
    (room / "meta.json").write_text('{"mine": 1}')
    for folder in (".", str(room), "/"):
        code, err = run(capsys, WRITERS["parquet"]("cap.pickle") + [folder])
        assert code == 2 and "holds other files" in err, err
    assert (room / "meta.json").read_text() == '{"mine": 1}'
    (room / "empty").mkdir()
    for _ in range(2):  # new and empty, then an earlier export
        assert run(capsys, WRITERS["parquet"]("cap.pickle") + ["empty"])[0] == 0
    assert json.loads((room / "empty" / "meta.json").read_text())["generator"] == "memtui"


def test_the_baseline_and_the_config_are_inputs_too(room, capsys):
    write_loop(room / "base.pickle", steps=4)
    code, err = run(capsys, ["check", "cap.pickle", "--baseline", "base.pickle", "--junit",
                             "base.pickle"])
    assert code == 2 and "is the input base.pickle" in err


def test_a_name_of_255_characters_is_written(room, capsys):
    name = "r" * 250 + ".html"
    assert run(capsys, WRITERS["report"]("cap.pickle") + [name])[0] == 0
    assert (room / name).read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in room.iterdir() if p.name.endswith(".tmp")] == []


def test_a_failed_write_leaves_no_temporary(tmp_path):
    class Boom(Exception):
        pass

    with pytest.raises(Boom), OutputFolder(tmp_path) as folder, folder.atomic("x.txt") as fh:
        fh.write("half")
        raise Boom
    assert list(tmp_path.iterdir()) == []


def test_a_new_output_gets_the_mode_of_a_new_file(tmp_path):
    mask = os.umask(0o027)
    try:
        write_atomically(tmp_path / "x.txt", "x")
    finally:
        os.umask(mask)
    assert (tmp_path / "x.txt").stat().st_mode & 0o777 == 0o640


def test_the_checks_refuse_nul_and_name_what_they_refuse(tmp_path):
    with pytest.raises(CaptureError, match="NUL"):
        output_file("a\x00b")
    with pytest.raises(CaptureError, match="NUL"):
        output_folder("a\x00b")
    assert output_file(tmp_path / "new.html") == tmp_path / "new.html"
    assert output_folder(tmp_path / "new") == tmp_path / "new"


# -- random output paths ------------------------------------------------------------------

SAFE_CHARS = st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",))
KINDS = ["new", "long", "existing file", "existing folder", "link to target",
         "link to input", "hard link to input", "input", "dangling link", "link to folder",
         "empty", "dot", "root", "trailing slash", "missing parent", "inside folder"]


def _make(room: Path, cap: Path, kind: str, name: str) -> str:
    """An output path of ``kind`` in ``room`` (what was there before is made now); ``cap``
    is the input."""
    path = room / name
    if kind == "long":
        return str(room / ("L" * 251 + ".out"))
    if kind == "existing file":
        path.write_text("old")
    elif kind == "existing folder":
        path.mkdir()
    elif kind == "link to target":
        path.symlink_to(room / "target.txt")
    elif kind == "link to input":
        path.symlink_to(cap)
    elif kind == "hard link to input":
        os.link(cap, path)
    elif kind == "input":
        return str(cap)
    elif kind == "dangling link":
        path.symlink_to(room / "nowhere" / "x")
    elif kind == "link to folder":
        (room / "realdir").mkdir(exist_ok=True)
        path.symlink_to(room / "realdir", target_is_directory=True)
    elif kind == "empty":
        return ""
    elif kind == "dot":
        return "."
    elif kind == "root":
        return "/"
    elif kind == "trailing slash":
        return str(path) + "/"
    elif kind == "missing parent":
        return str(room / "missing" / name)
    elif kind == "inside folder":
        (room / "inner").mkdir(exist_ok=True)
        return str(room / "inner" / name)
    return str(path)


def _plant_links(room: Path, name: str) -> None:
    """Links to the target at every temporary name an older memtui used."""
    for folder in (room, room / "inner", room / name):
        for temp in (f".{name}.tmp", ".events.parquet.tmp", ".meta.json.tmp",
                     ".blocks.parquet.tmp"):
            candidate = folder / temp
            if folder.is_dir() and not candidate.is_symlink() and not candidate.exists():
                candidate.symlink_to(room / "target.txt")


def _valid(writer: str, out: Path) -> bool:
    if writer == "report":
        return out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    if writer == "perfetto":
        return bool(json.loads(out.read_text(encoding="utf-8"))["traceEvents"])
    if writer == "junit":
        return ET.fromstring(out.read_bytes()).tag == "testsuites"
    meta = json.loads((out / "meta.json").read_text(encoding="utf-8"))
    return all(pl.read_parquet(out / f, glob=False).height >= 0  # a "[" in the name
               for f in meta["files"])


@pytest.fixture(scope="module")
def shared_capture(tmp_path_factory) -> Path:
    """One input for every example (reopened from the cache after the first)."""
    return write_loop(tmp_path_factory.mktemp("input") / "cap.pickle", steps=3)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(writer=st.sampled_from(sorted(WRITERS)), kind=st.sampled_from(KINDS),
       name=st.text(SAFE_CHARS, min_size=1, max_size=40).filter(
           lambda n: n not in (".", "..") and n.encode("utf-8", "surrogatepass") == n.encode()
           and len(n.encode()) < 200),
       plant=st.booleans())
def test_random_output_paths(tmp_path_factory, capsys, shared_capture, writer, kind, name,
                             plant):
    room = tmp_path_factory.mktemp("out")
    (room / "target.txt").write_text(TARGET_TEXT)
    cap_bytes = shared_capture.read_bytes()
    output = _make(room, shared_capture, kind, name)
    if plant:
        _plant_links(room, name)
    links_before = {p: os.readlink(p) for p in room.rglob("*") if p.is_symlink()}
    cwd = os.getcwd()
    os.chdir(room)  # "-o ." and "-o ''" name the room
    try:
        code, err = run(capsys, WRITERS[writer](str(shared_capture)) + [output])
    finally:
        os.chdir(cwd)

    assert code in (0, 2) and "Traceback" not in err, err
    assert err.count("\n") == (0 if code == 0 and writer == "junit" else 1), err
    assert shared_capture.read_bytes() == cap_bytes
    assert (room / "target.txt").read_text() == TARGET_TEXT
    leftovers = [p for p in room.rglob("*.tmp") if not p.is_symlink()]
    assert leftovers == []
    for link, target in links_before.items():  # a link is kept, or replaced by the output
        assert not link.is_symlink() or os.readlink(link) == target
    if kind in ("input", "hard link to input", "empty", "link to target", "link to input",
                "dangling link", "link to folder"):
        assert code == 2, (kind, err)
    if writer != "parquet" and kind in ("existing folder", "dot", "root", "trailing slash",
                                        "missing parent"):  # (a Parquet folder is made)
        assert code == 2, (kind, err)
    if kind in ("dot", "root"):  # a folder holding others' files: never written in
        assert code == 2, (kind, err)
    if code == 0:
        out = Path(output)
        assert not out.is_symlink() and _valid(writer, out)


def test_junit_never_writes_over_the_settings_it_read(room, capsys):
    """The pyproject.toml found above the current folder and a --roles file are inputs."""
    (room / "pyproject.toml").write_text("[tool.memtui.check]\nmax-peak = \"1GiB\"\n")
    (room / "rules.toml").write_text("[tool.memtui.roles]\ncache = \"kv_cache\"\n")
    before = {p: p.read_bytes() for p in (room / "pyproject.toml", room / "rules.toml")}
    for target, extra in (("pyproject.toml", []), ("rules.toml", ["--roles", "rules.toml"])):
        code, err = run(capsys, ["check", "cap.pickle", *extra, "--junit", target])
        assert code == 2 and "is the input" in err, err
    assert {p: p.read_bytes() for p in before} == before


@pytest.mark.skipif(not os.path.lexists("/proc/1/cwd"), reason="no /proc/1/cwd here")
def test_a_roles_file_behind_a_link_into_proc_is_one_line(room, capsys):
    (room / "x").symlink_to("/proc/1/cwd")
    code, err = run(capsys, ["check", "cap.pickle", "--roles", "x/rules.toml"])
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err


def test_the_uis_csv_export_never_writes_through_a_planted_link(room, monkeypatch):
    """The Tables screen's export goes to ``memtui-KIND-TIME.csv`` here or in the temp
    folder: a name a neighbour can predict and plant a link at."""
    from memtui.tui.screens import tables

    monkeypatch.setattr(tables, "_csv_name", lambda kind: f"memtui-{kind}-fixed.csv")
    (room / "memtui-blocks-fixed.csv").symlink_to(room / "target.txt")
    path = tables._write_csv("a,b\n1,2\n", "blocks")
    assert path == room / "memtui-blocks-fixed.csv" and not path.is_symlink()
    assert path.read_text() == "a,b\n1,2\n"
    assert (room / "target.txt").read_text() == TARGET_TEXT
