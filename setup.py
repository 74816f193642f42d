"""Build script: only the optional compiled snapshot reader (pyproject.toml has the rest).

``memtui.sources.torch_snapshot._reader`` (C, CPython API only) reads PyTorch snapshot pickles
straight into columns.  It is optional, as msgpack's and PyYAML's extensions are: where no C
compiler is found or the build fails, ``pip install`` goes on without it and memtui uses the safe
Python reader, which gives identical results.  ``MEMTUI_BUILD_EXT=0`` skips the build;
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
        print(f"memtui: the compiled snapshot reader was not built ({exc}); the Python "
              "reader is used instead (same results, slower on big snapshots)", file=sys.stderr)


def extensions() -> list[Extension]:
    if os.environ.get("MEMTUI_BUILD_EXT") == "0":
        return []
    return [Extension(
        "memtui.sources.torch_snapshot._reader",
        sources=["memtui/sources/torch_snapshot/_reader.c"],
        extra_compile_args=["-O2"] if os.name != "nt" else [],
        optional=os.environ.get("MEMTUI_BUILD_EXT") != "1",
    )]


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
