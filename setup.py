"""Build script: only the optional compiled extensions (pyproject.toml has the rest).

``memtui.sources.torch_snapshot._reader`` (C, CPython API only) reads PyTorch snapshot pickles
straight into columns, ``memtui.sources.common._pairing`` pairs a big trace's allocs and frees
into lifetimes in one pass, ``memtui.sources.memscope._rows`` reads the Attr keys of an
msMemScope DB and pairs its rows into blocks, each in one pass, and
``memtui.analysis.replay._replay`` runs the what-if replay's per-event loop.  They are optional,
as msgpack's and PyYAML's extensions are: where no C compiler is found or a build fails,
``pip install`` goes on without them and memtui uses the safe Python reader, the numpy pairing
and the Python replay, which give identical results.  ``MEMTUI_BUILD_EXT=0`` skips the build;
``MEMTUI_BUILD_EXT=1`` makes a failed build an error (CI).
"""

from __future__ import annotations

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


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
            self._skipped(exc)

    @staticmethod
    def _skipped(exc: Exception) -> None:
        if os.environ.get("MEMTUI_BUILD_EXT") == "1":
            raise exc
        print(f"memtui: a compiled extension was not built ({exc}); its Python path is used "
              "instead (same results, slower on big snapshots)", file=sys.stderr)


def extensions() -> list[Extension]:
    if os.environ.get("MEMTUI_BUILD_EXT") == "0":
        return []
    return [Extension(
        name, sources=[source],
        extra_compile_args=["-O2"] if os.name != "nt" else [],
        optional=os.environ.get("MEMTUI_BUILD_EXT") != "1",
    ) for name, source in (
        ("memtui.sources.torch_snapshot._reader", "memtui/sources/torch_snapshot/_reader.c"),
        ("memtui.sources.common._pairing", "memtui/sources/common/_pairing.c"),
        ("memtui.sources.memscope._rows", "memtui/sources/memscope/_rows.c"),
        ("memtui.analysis.replay._replay", "memtui/analysis/replay/_replay.c"),
    )]


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
