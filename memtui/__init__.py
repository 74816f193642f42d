"""memtui: a terminal explorer for GPU and Ascend NPU memory captures."""

__version__ = "0.1.0"
