"""PyTorch (CUDA and torch_npu) memory snapshots: ``sniff`` and ``load``.

Reading is the safe unpickler's job (:mod:`memtui.sources.common.safe_pickle`: refuses
every global, so nothing in a file runs); turning the snapshot's dicts into the model is
:mod:`memtui.sources.torch_snapshot.build`'s.  See ../shared/formats/torch_snapshot.md.
"""

from memtui.sources.torch_snapshot.build import NAME, SOURCE, load, sniff

__all__ = ["NAME", "SOURCE", "load", "sniff"]
