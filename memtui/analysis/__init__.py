"""Pure functions over MemoryTrace frames, grouped by the question each answers.

* :mod:`.timeline`: levels over time, the state at a moment, series, downsampling;
* :mod:`.layout`: pools, segments, the block map, addresses;
* :mod:`.stacks`: call stacks, the stack tree, owners, the call flame;
* :mod:`.findings`: leaks, peak, OOM, fragmentation, inefficient blocks, capture limits,
  with the attribution of every byte;
* :mod:`.replay`: the caching allocator replayed (what if);
* :mod:`.across`: compare two runs, many ranks;
* :mod:`.limits`: memory limits (``memtui check``);
* :mod:`.summary`, :mod:`.tables`: the summary's figures, the Tables screen's rows.

Nothing here imports textual, reads a file or formats a verdict for people (that is
:mod:`memtui.text`).
"""
