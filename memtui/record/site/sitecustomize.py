"""Put first on ``PYTHONPATH`` by ``memtui record``: starts the recording in the script's process.

It loads ``memtui/record/recorder.py`` by file path (the script may run in another Python
than memtui's, so nothing of memtui is put on its path), installs the recording, then
imports the ``sitecustomize`` this one hides, if any, so the user's own still runs.
"""

import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_recorder = os.path.join(os.path.dirname(_here), "recorder.py")


def _install():
    spec = importlib.util.spec_from_file_location("memtui_record_recorder", _recorder)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses need the module registered
    spec.loader.exec_module(module)
    module.install_from_environment()


def _chain():
    """Import the next ``sitecustomize`` on the path (the one this file shadows)."""
    this = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    try:
        import sitecustomize  # noqa: F401
    except ImportError:
        pass
    finally:
        sys.path[:] = saved
        sys.modules["sitecustomize"] = this  # the import system looks this one up after


try:
    _install()
except Exception as exc:  # the script must run whatever happens here
    print(f"memtui record: could not set up recording ({type(exc).__name__}: {exc})",
          file=sys.stderr)
_chain()
