"""Opening inputs safely: regular files only, and one plain sentence for every path problem.

Every sniff helper reads a file's first bytes through :func:`read_head`, which never
blocks (a FIFO, a terminal or a socket is not opened for reading: it is not a regular
file) and never raises.  :func:`check_input` says, before any loader runs, why a path
cannot be read: missing, a symlink loop, permission denied, not a regular file, empty.
:func:`compression` names a compressed file's format, so that "not a format memtui
reads" is never said of a capture that was only gzipped.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from memtui.errors import CaptureError

#: Magic bytes of compressed or archived files -> the format's name.
_COMPRESSED = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bzip2"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"PK\x03\x04", "zip"),
    (b"7z\xbc\xaf\x27\x1c", "7-zip"),
    (b"\x04\x22\x4d\x18", "lz4"),
)

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def kind_of_mode(mode: int) -> str:
    """What a non-regular, non-folder ``st_mode`` is, in words."""
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


def open_regular(path: Path):
    """``path`` opened for binary reading, or an OSError if it is not a regular file.

    Opened non-blocking first, so that a FIFO without a writer never hangs the open.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"{kind_of_mode(mode)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_head(path: Path, size: int) -> bytes:
    """The first ``size`` bytes of a regular file; b"" for anything else (never raises)."""
    try:
        with open_regular(path) as handle:
            return handle.read(size)
    except (OSError, ValueError):
        return b""


def is_folder(path: str | Path) -> bool:
    """Whether ``path`` is a folder (a link to one too); False where it cannot be looked
    at (missing, ``x -> /proc/1/cwd``: permission denied), never an exception."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def check_input(path: Path, allow_empty: bool = False) -> None:
    """Raise a :class:`CaptureError` saying why ``path`` cannot be read, if it cannot
    (``allow_empty``: an empty file is fine, as one followed before its writer wrote)."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise CaptureError(path, _stat_problem(path, exc)) from None
    except ValueError:  # (os.stat refuses a NUL inside a path)
        raise CaptureError(path, "a NUL character in the path: no file has that name") \
            from None
    if stat.S_ISDIR(info.st_mode):
        if not os.access(path, os.R_OK | os.X_OK):
            raise CaptureError(path, "cannot read the folder (permission denied)")
        return
    if not stat.S_ISREG(info.st_mode):
        raise CaptureError(path, f"{kind_of_mode(info.st_mode)}, not a capture file: "
                                 "memtui reads regular files and folders only")
    try:
        with open_regular(path):
            pass
    except PermissionError:
        raise CaptureError(path, "cannot read it (permission denied)") from None
    except OSError as exc:
        raise CaptureError(path, f"cannot read it ({exc.strerror or exc})") from None
    if info.st_size == 0 and not allow_empty:
        raise CaptureError(path, "the file is empty")


def _stat_problem(path: Path, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a symbolic link loop (the link points back to itself)"
    if exc.errno == errno.EACCES:
        return "cannot reach it (permission denied on a folder above it)"
    if exc.errno == errno.ENOTDIR:
        return "no such file or folder (a part of the path is a file, not a folder)"
    if exc.errno == errno.ENOENT:
        if os.path.islink(path):
            return "a symbolic link to a file that does not exist"
        return "no such file or folder"
    if exc.errno == errno.ENAMETOOLONG:
        return "the file name is too long"
    return f"cannot read it ({exc.strerror or exc})"


def compression(path: Path) -> str | None:
    """The compression or archive format ``path`` is in, by its magic bytes, or None."""
    head = read_head(path, 8)
    return next((name for magic, name in _COMPRESSED if head.startswith(magic)), None)
