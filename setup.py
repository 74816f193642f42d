"""Build script: only the optional compiled extensions (pyproject.toml has the rest).

``memtui.sources.torch_snapshot._reader`` (C, CPython API only) reads PyTorch snapshot pickles
straight into columns, ``memtui.sources.common._pairing`` pairs a big trace's allocs and frees
into lifetimes in one pass, ``memtui.sources.memscope._rows`` reads the Attr keys of an
msMemScope DB and pairs its rows into blocks, each in one pass, and
``memtui.analysis.replay._replay`` runs the what-if replay's per-event loop, and
``memtui.sources.common._sqlite_rows`` steps an msMemScope DB's rows through the system's
libsqlite3 (the library Python's ``sqlite3`` loads) into column buffers.  They are optional,
as msgpack's and PyYAML's extensions are: where no C compiler is found or a build fails,
``pip install`` goes on without them and memtui uses the safe Python reader, the numpy pairing
and the Python replay, which give identical results.  ``MEMTUI_BUILD_EXT=0`` skips the build;
``MEMTUI_BUILD_EXT=1`` makes a failed build an error (CI), except for the extensions of
:data:`NEEDS_SYSTEM_LIBRARY`, which need a library's header (``sqlite3.h``) that a machine with a
compiler may lack: where it fails, the ADBC driver reads the rows, as it does without a compiler.
"""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

#: Extensions built against a system library's header: never required (see the docstring).
NEEDS_SYSTEM_LIBRARY = {"memtui.sources.common._sqlite_rows": ["sqlite3"]}


class OptionalBuildExt(build_ext):
    """build_ext that warns and carries on where the compiler is missing or fails."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any failure means "no compiler"
            self._skipped(exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            self._skipped(exc, required=ext.name not in NEEDS_SYSTEM_LIBRARY)

    @staticmethod
    def _skipped(exc: Exception, required: bool = True) -> None:
        if required and os.environ.get("MEMTUI_BUILD_EXT") == "1":
            raise exc
        print(f"memtui: a compiled extension was not built ({exc}); its Python path is used "
              "instead (same results, slower on big snapshots)", file=sys.stderr)


def extensions() -> list[Extension]:
    if os.environ.get("MEMTUI_BUILD_EXT") == "0":
        return []
    return [Extension(
        name, sources=[source],
        extra_compile_args=["-O2"] if os.name != "nt" else [],
        libraries=NEEDS_SYSTEM_LIBRARY.get(name, []),
        optional=os.environ.get("MEMTUI_BUILD_EXT") != "1" or name in NEEDS_SYSTEM_LIBRARY,
    ) for name, source in (
        ("memtui.sources.torch_snapshot._reader", "memtui/sources/torch_snapshot/_reader.c"),
        ("memtui.sources.common._pairing", "memtui/sources/common/_pairing.c"),
        ("memtui.sources.memscope._rows", "memtui/sources/memscope/_rows.c"),
        ("memtui.analysis.replay._replay", "memtui/analysis/replay/_replay.c"),
        ("memtui.sources.common._sqlite_rows", "memtui/sources/common/_sqlite_rows.c"),
    )]


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
