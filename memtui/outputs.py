"""Files memtui writes for the user: checked first, then written whole, never through a link.

The one way ``memtui report`` (the HTML page), ``memtui export`` (the Perfetto JSON, the
Parquet folder's files) and ``memtui check --junit`` write their outputs:

* :func:`output_file` / :func:`output_folder` check the path a user named before any work
  is done, and say in one line (a :class:`~memtui.errors.CaptureError` naming the path)
  what is wrong with it: empty, a NUL in it, a folder where a file is asked for (``.``,
  ``/``, ``dir/``), a file where a folder is, a symbolic link (never written through), or
  one of the command's own inputs (``memtui report CAP -o CAP`` would replace the
  capture; a hard link or a link to an input is the input too);
* :func:`write_atomically` (and :func:`atomic_file` for writers that stream, and
  :class:`OutputFolder` for several files in one folder) writes into a temporary file
  created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` under a random name in the output's own
  folder, held open, so a name planted there beforehand (a link at ``.NAME.tmp``) is never
  opened, then renames it over the output (a rename replaces a link put at the output
  meanwhile: it never writes through one).  The temporary's name is short, so an output
  name of 255 characters is written too; a failed write removes it.  The file gets the
  mode any new file gets (``0o666`` less the umask).

Standard library only, plus :mod:`memtui.errors`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from memtui.errors import CaptureError

PathLike = str | os.PathLike


def _named(path: PathLike) -> Path:
    """``path`` as a Path, refused where it cannot name a file at all."""
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not text.strip():
        raise CaptureError(repr(text), "an empty output path: name the file to write")
    if "\x00" in text:
        raise CaptureError(text, "a NUL character in an output path")
    return Path(text)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CaptureError(path, f"cannot write it ({exc.strerror or exc})") from None


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _input_stats(inputs: Iterable[PathLike | None]) -> list[tuple[str, os.stat_result]]:
    """(name, stat) of each input that exists (a link followed: its target is the input)."""
    found = []
    for item in inputs:
        if item is None:
            continue
        try:
            found.append((os.fspath(item), os.stat(item)))
        except (OSError, ValueError):
            continue
    return found


def _refuse_an_input(path: Path, info: os.stat_result | None,
                     inputs: list[tuple[str, os.stat_result]]) -> None:
    if info is None:
        return
    for name, known in inputs:
        if _same_file(info, known):
            raise CaptureError(path, f"is the input {name}: memtui never writes over a "
                                     "capture (name another output)")


def output_file(path: PathLike, inputs: Iterable[PathLike | None] = ()) -> Path:
    """The file ``path`` names, checked before any work: a CaptureError where it cannot be
    written as one whole file (see the module docstring)."""
    out = _named(path)
    if os.fspath(path).endswith(("/", os.sep)) or out.name in ("", ".", ".."):
        raise CaptureError(out, "is a folder: name the file to write in it")
    info = _lstat(out)
    if info is not None:
        if stat.S_ISLNK(info.st_mode):
            raise CaptureError(out, "is a symbolic link: memtui does not write through "
                                    "one (remove it, or name another file)")
        if stat.S_ISDIR(info.st_mode):
            raise CaptureError(out, "is a folder: name the file to write in it")
        if not stat.S_ISREG(info.st_mode):
            raise CaptureError(out, "is not a regular file (a device, a FIFO, a socket)")
    _refuse_an_input(out, info, _input_stats(inputs))
    _check_folder_of(out)
    return out


def output_folder(path: PathLike, inputs: Iterable[PathLike | None] = (),
                  marker: Callable[[Path], bool] | None = None) -> Path:
    """The folder ``path`` names (made later, where missing), checked before any work:
    a CaptureError where it is a file, a link, one of the inputs, or a folder holding
    files unless it is empty or ``marker(folder)`` recognises an earlier output there
    (``-o .`` in a home folder never replaces someone's ``meta.json``)."""
    out = _named(path)
    info = _lstat(out)
    if info is not None:
        if stat.S_ISLNK(info.st_mode):
            raise CaptureError(out, "is a symbolic link: memtui does not write through "
                                    "one (remove it, or name another folder)")
        if not stat.S_ISDIR(info.st_mode):
            raise CaptureError(out, "is not a folder: the Parquet files go in a folder")
        if not _ours_or_empty(out, marker):
            raise CaptureError(out, "holds other files: name a new or empty folder, or one "
                                    "memtui exported to before (nothing of yours is replaced)")
    _refuse_an_input(out, info, _input_stats(inputs))
    return out


def _ours_or_empty(folder: Path, marker: Callable[[Path], bool] | None) -> bool:
    """Whether ``folder`` is empty, or ``marker`` says it holds an earlier output of ours."""
    try:
        with os.scandir(folder) as entries:
            empty = next(entries, None) is None
    except OSError as exc:
        raise CaptureError(folder, f"cannot look into it ({exc.strerror or exc})") from None
    return empty or (marker is not None and marker(folder))


def _check_folder_of(out: Path) -> None:
    """The folder the output goes in exists and is a folder (said before any work)."""
    folder = out.parent
    try:
        info = os.stat(folder)
    except FileNotFoundError:
        raise CaptureError(out, f"cannot write it: its folder {folder} does not exist") \
            from None
    except OSError as exc:
        raise CaptureError(out, f"cannot write it: its folder {folder} cannot be read "
                                f"({exc.strerror or exc})") from None
    if not stat.S_ISDIR(info.st_mode):
        raise CaptureError(out, f"cannot write it: {folder} is not a folder")


class OutputFolder:
    """A folder outputs are written into, held open (``O_DIRECTORY``): every temporary
    is created and renamed relative to it, so a folder swapped for a link meanwhile is
    never written through.  ``create``: made where missing (and, made or not, refused
    where it is a link: ``O_NOFOLLOW``)."""

    def __init__(self, path: PathLike, create: bool = False,
                 inputs: Iterable[PathLike | None] = ()) -> None:
        self.path = Path(path)
        self.inputs = _input_stats(inputs)
        flags = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)
        if create:
            with contextlib.suppress(FileExistsError):
                self.path.mkdir(parents=True)
            flags |= os.O_NOFOLLOW
        try:
            self.fd = os.open(self.path, flags)
        except OSError as exc:
            raise CaptureError(self.path, f"cannot write in it ({exc.strerror or exc})") \
                from None

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> OutputFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _temporary(self, name: str) -> tuple[int, str]:
        stem = name[:24].lstrip(".") or "out"
        flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0))
        for _ in range(100):
            temp = f".{stem}.{secrets.token_hex(6)}.tmp"
            try:  # 0o666 less the umask, as any new file
                return os.open(temp, flags, 0o666, dir_fd=self.fd), temp
            except FileExistsError:
                continue
        raise FileExistsError(f"no free temporary name in {self.path}")

    @contextlib.contextmanager
    def atomic(self, name: str, mode: str = "w") -> Iterator[IO[Any]]:
        """A file object whose content becomes ``name`` in this folder when the block
        ends without an error (see :func:`atomic_file`)."""
        fd, temp = self._temporary(name)
        try:
            with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as fh:
                yield fh
            self._refuse_an_input(name)  # (one planted meanwhile)
            os.replace(temp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=self.fd)
            raise

    def _refuse_an_input(self, name: str) -> None:
        try:
            info = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        _refuse_an_input(self.path / name, info, self.inputs)


@contextlib.contextmanager
def atomic_file(path: PathLike, mode: str = "w",
                inputs: Iterable[PathLike | None] = ()) -> Iterator[IO[Any]]:
    """A file object to write ``path``'s content into: a temporary created exclusively
    (``O_CREAT | O_EXCL | O_NOFOLLOW``) in its folder, renamed over ``path`` when the block
    ends without an error (removed where it raises).  ``mode`` is ``"w"`` (UTF-8 text) or
    ``"wb"``.  OSError from the disk propagates (the caller says it in one line)."""
    out = Path(path)
    with OutputFolder(out.parent, inputs=inputs) as folder, folder.atomic(out.name, mode) as fh:
        yield fh


def write_atomically(path: PathLike, data: str | bytes,
                     inputs: Iterable[PathLike | None] = ()) -> Path:
    """``data`` as the whole content of ``path`` (see :func:`atomic_file`)."""
    with atomic_file(path, "wb" if isinstance(data, bytes) else "w", inputs) as fh:
        fh.write(data)
    return Path(path)


__all__ = ["OutputFolder", "atomic_file", "output_file", "output_folder", "write_atomically"]
