"""Helpers every source shares: the safe unpickler, the SQLite connect helper, alloc/free
pairing (:mod:`lifetimes`) and call-stack interning (:mod:`stacks`).  Nothing here knows a
format; nothing here imports ``memtui.analysis`` or textual."""
