"""The Attr keys of an msMemScope DB's JSON Attr column (and its Ptr addresses), read by
the compiled pass.

:func:`decode_json_attr` takes the Attr column as SQLite handed it over (an Arrow string
array, in the thread that fetched it) and gives the columns the model needs: ``aid``
(``allocation_id``), ``raw_size``, ``total``, ``owner``, ``ineff`` (``inefficient_type``)
and ``apool`` (the pool an ACCESS row names).  The compiled pass (``_rows.c``, built at
install where a compiler was found) reads each text once; the polars reference,
:func:`memtui.sources.memscope.read.parse_attr`, reads the rows where it is not built or
``MEMTUI_PURE_PYTHON=1`` is set, and tests hold both to the same columns.

:func:`decode_pointers` reads the ``Ptr`` column the same way, where it holds msMemScope's
own notation (``0x`` and hexadecimal digits); its reference is
:func:`memtui.sources.memscope.read.addresses`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from memtui.sources.common.compiled import in_use_line, pure_python_forced

try:
    from memtui.sources.memscope import _rows
except ImportError:  # built without a compiler: the polars reference only
    _rows = None

if TYPE_CHECKING:
    import pyarrow as pa

#: The columns :func:`decode_json_attr` gives, as ``parse_attr`` names them.
NUMBERS = ("aid", "raw_size", "total")
TEXTS = ("owner", "ineff", "apool")


def compiled_attr() -> bool:
    """Whether the compiled pass reads JSON Attr in this process."""
    return _rows is not None and not pure_python_forced()


def attr_in_use() -> str:
    """How msMemScope DB Attr is read (see :func:`in_use_line`)."""
    return in_use_line("msMemScope Attr", _rows is not None, "polars")


def decode_json_attr(array: pa.Array | pa.ChunkedArray) -> pl.DataFrame | None:
    """The Attr keys of ``array`` (string or large_string, JSON with string values), one
    row per value; None where the compiled pass does not run (the caller reads the rows
    with the polars reference then)."""
    if not compiled_attr():
        return None
    import pyarrow as pa

    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    parts = [_decode_chunk(chunk) for chunk in chunks]
    if not parts:
        return pl.DataFrame(schema={**dict.fromkeys(NUMBERS, pl.Int64),
                                    **dict.fromkeys(TEXTS, pl.String)})
    return parts[0] if len(parts) == 1 else pl.concat(parts)


def decode_pointers(array: pa.Array | pa.ChunkedArray) -> pl.Series | None:
    """The ``Ptr`` texts of ``array`` (string or large_string) that are ``0x`` and
    hexadecimal digits of a value below 2**63, as UInt64, null elsewhere (those rows are
    read the general way, :func:`memtui.sources.memscope.read.addresses`); None where the
    compiled pass does not run."""
    if not compiled_attr():
        return None
    import pyarrow as pa

    chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
    parts = []
    for chunk in chunks:
        args = _string_buffers(chunk)
        values, bits = _rows.pointers(*args)
        parts.append(pa.Array.from_buffers(pa.uint64(), len(chunk),
                                           [pa.py_buffer(bits), pa.py_buffer(values)]))
    return pl.Series("addr", pa.chunked_array(parts, pa.uint64()), dtype=pl.UInt64)


def _string_buffers(chunk: pa.Array) -> tuple:
    """(data, offsets, validity, offset, length, wide): a string array's buffers as the
    compiled pass takes them."""
    import pyarrow as pa

    if pa.types.is_string(chunk.type):
        wide = False
    elif pa.types.is_large_string(chunk.type):
        wide = True
    else:
        chunk = chunk.cast(pa.large_string())
        wide = True
    validity, offsets, data = chunk.buffers()
    return data if data is not None else b"", offsets, validity, chunk.offset, len(chunk), wide


def _decode_chunk(chunk: pa.Array) -> pl.DataFrame:
    import pyarrow as pa

    n = len(chunk)
    numbers, texts = _rows.decode(*_string_buffers(chunk))
    columns = {}
    for index, name in enumerate(NUMBERS):
        values, bits = numbers[2 * index], numbers[2 * index + 1]
        columns[name] = pa.Array.from_buffers(pa.int64(), n, [pa.py_buffer(bits),
                                                              pa.py_buffer(values)])
    for index, name in enumerate(TEXTS):
        offs, text, bits = texts[3 * index: 3 * index + 3]
        columns[name] = pa.Array.from_buffers(
            pa.large_string(), n, [pa.py_buffer(bits), pa.py_buffer(offs), pa.py_buffer(text)])
    frame = pl.from_arrow(pa.table(columns))
    # (owner and inefficient_type: an empty value is none, as the reference says)
    return frame.with_columns(pl.when(pl.col(name) != "").then(pl.col(name)).alias(name)
                              for name in ("owner", "ineff"))
