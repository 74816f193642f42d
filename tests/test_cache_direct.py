"""The cache's file writer (``cache._HashingWriter``): direct I/O where the file system
allows it, from an aligned buffer, the last block padded and cut off again; the ordinary
way where direct I/O is refused at open or fails with EINVAL part way.  Every way, the file
holds exactly the bytes written, and the size and digest count exactly those."""

from __future__ import annotations

import errno
import gc
import os

import pytest
import xxhash

from memtui import cache

BUFFER = cache._DIRECT_BUFFER
SIZES = [0, 1, 4095, 4096, 4097, BUFFER - 1, BUFFER, BUFFER + 1, 2 * BUFFER + 12345]


def payload(size: int) -> bytes:
    return (bytes(range(251)) * (size // 251 + 1))[:size]


def write_in_pieces(file, data: bytes, pieces: list[int]) -> cache._HashingWriter:
    with cache._HashingWriter(file) as out:
        at = 0
        for piece in pieces:
            out.write(memoryview(data)[at:at + piece])
            at += piece
        out.write(data[at:])
    return out


def assert_written(file, data: bytes, out: cache._HashingWriter) -> None:
    assert file.read_bytes() == data
    assert out.size == len(data) == file.stat().st_size
    assert out.hexdigest() == xxhash.xxh3_128_hexdigest(data)


def of_file(fd: int, file) -> bool:
    """Whether ``fd`` is open on ``file`` (a fake of os.write or os.preadv answers for its
    test's file only: a store still going in another thread may write meanwhile)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}") == str(file)
    except OSError:
        return True


def direct_allowed(folder) -> bool:
    probe = folder / "probe"
    with cache._HashingWriter(probe) as out:
        direct = out._direct
    probe.unlink()
    return direct


@pytest.mark.parametrize("size", SIZES)
def test_every_size_is_written_exactly(tmp_path, size):
    data = payload(size)
    out = write_in_pieces(tmp_path / "f.arrow", data, [size // 3, 7, 1000])
    assert_written(tmp_path / "f.arrow", data, out)


def test_direct_io_is_used_where_the_file_system_allows_it(tmp_path):
    if not hasattr(os, "O_DIRECT"):
        pytest.skip("no O_DIRECT on this platform")
    if not direct_allowed(tmp_path):
        pytest.skip(f"the file system of {tmp_path} refuses O_DIRECT")
    writes = []
    real_write = os.write

    def counted(fd, data):
        if of_file(fd, tmp_path / "d.arrow"):
            writes.append(len(data))
        return real_write(fd, data)

    data = payload(BUFFER + 5000)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "write", counted)
        out = write_in_pieces(tmp_path / "d.arrow", data, [100, 200])
    # two whole writes: the full buffer, then the last 5000 bytes padded to two blocks
    assert writes == [BUFFER, 2 * 4096]
    assert_written(tmp_path / "d.arrow", data, out)


def test_a_file_system_refusing_direct_io_is_written_the_ordinary_way(tmp_path, monkeypatch):
    real_open = os.open

    def refusing(path, flags, mode=0o777):
        if flags & getattr(os, "O_DIRECT", 0):
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", refusing)
    data = payload(BUFFER + 3)
    out = write_in_pieces(tmp_path / "o.arrow", data, [10])
    assert not out._direct
    assert_written(tmp_path / "o.arrow", data, out)


def test_a_direct_write_failing_part_way_goes_on_the_ordinary_way(tmp_path, monkeypatch):
    if not hasattr(os, "O_DIRECT") or not direct_allowed(tmp_path):
        pytest.skip("no direct I/O here to fail")
    real_write = os.write
    calls = {"n": 0}

    def failing_second(fd, data):
        if not of_file(fd, tmp_path / "p.arrow"):
            return real_write(fd, data)
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", failing_second)
    data = payload(2 * BUFFER + 777)
    out = write_in_pieces(tmp_path / "p.arrow", data, [BUFFER // 2])
    assert not out._direct and calls["n"] >= 3
    assert_written(tmp_path / "p.arrow", data, out)


def test_other_write_errors_are_raised(tmp_path, monkeypatch):
    real_write = os.write

    def full(fd, data):
        if not of_file(fd, tmp_path / "e.arrow"):
            return real_write(fd, data)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError) as caught, cache._HashingWriter(tmp_path / "e.arrow") as out:
        out.write(payload(BUFFER + 1))
    assert caught.value.errno == errno.ENOSPC
    assert out.closed
    # Closed once: closing again (as the collector does) touches no descriptor, not even
    # one whose number another file took meanwhile.
    other = os.open(tmp_path / "other", os.O_WRONLY | os.O_CREAT)
    try:
        monkeypatch.setattr(os, "write", real_write)
        out.close()
        del out
        gc.collect()
        os.write(other, b"still open")
    finally:
        os.close(other)
    assert (tmp_path / "other").read_bytes() == b"still open"


# -- reading back: the digest of a reopened entry's file ------------------------------------


def test_the_digest_reads_a_file_written_direct_and_one_in_the_file_cache(tmp_path):
    for size in (0, 5000, BUFFER, 3 * BUFFER + 99):
        data = payload(size)
        direct = write_in_pieces(tmp_path / f"w{size}", data, [])
        (tmp_path / f"c{size}").write_bytes(data)  # (in the file cache)
        assert cache._digest_file(tmp_path / f"w{size}") == direct.hexdigest()
        assert cache._digest_file(tmp_path / f"c{size}") == xxhash.xxh3_128_hexdigest(data)


def test_blocks_not_in_the_file_cache_are_read_direct_from_an_aligned_offset(tmp_path,
                                                                               monkeypatch):
    # The file cache "holds" the first 1000 bytes only: the rest is read through the
    # direct descriptor from offset 0 (aligned), its first 1000 bytes skipped.
    if not hasattr(os, "O_DIRECT") or not direct_allowed(tmp_path):
        pytest.skip("no direct I/O here")
    data = payload(2 * BUFFER + 4321)
    (tmp_path / "f").write_bytes(data)
    inode = (tmp_path / "f").stat().st_ino
    real = os.preadv
    seen = []

    def partly_cached(fd, buffers, offset, flags=0):
        if os.fstat(fd).st_ino != inode:  # (see of_file)
            return real(fd, buffers, offset, flags)
        if flags & os.RWF_NOWAIT:
            if offset == 0:
                return real(fd, [memoryview(buffers[0])[:1000]], 0)
            raise BlockingIOError(errno.EAGAIN, "not cached")
        seen.append(offset)
        return real(fd, buffers, offset)

    monkeypatch.setattr(os, "preadv", partly_cached)
    assert cache._digest_file(tmp_path / "f") == xxhash.xxh3_128_hexdigest(data)
    assert seen[0] == 0 and all(offset % 4096 == 0 for offset in seen)


def test_a_file_system_refusing_direct_reads_is_read_plainly(tmp_path, monkeypatch):
    data = payload(BUFFER + 17)
    (tmp_path / "f").write_bytes(data)
    inode = (tmp_path / "f").stat().st_ino
    real = os.preadv

    def no_direct(fd, buffers, offset, flags=0):
        if os.fstat(fd).st_ino != inode:  # (see of_file)
            return real(fd, buffers, offset, flags)
        if flags & getattr(os, "RWF_NOWAIT", 0):
            raise BlockingIOError(errno.EAGAIN, "not cached")
        if fcntl_flags(fd) & getattr(os, "O_DIRECT", 0):
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, buffers, offset)

    monkeypatch.setattr(os, "preadv", no_direct)
    assert cache._digest_file(tmp_path / "f") == xxhash.xxh3_128_hexdigest(data)


def fcntl_flags(fd: int) -> int:
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_GETFL)


def test_without_direct_io_the_digest_streams_the_file(tmp_path, monkeypatch):
    # (macOS and Windows: no O_DIRECT or no RWF_NOWAIT)
    monkeypatch.setattr(cache, "_direct_twin", lambda file, flags, info: None)
    monkeypatch.delattr(os, "preadv", raising=False)  # (Windows has none)
    for size in (0, 4097, BUFFER + 1):
        data = payload(size)
        (tmp_path / f"s{size}").write_bytes(data)
        assert cache._digest_file(tmp_path / f"s{size}") == xxhash.xxh3_128_hexdigest(data)
