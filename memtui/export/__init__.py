"""Files for the tools people already use, written from a loaded capture (issue 24).

* :mod:`.perfetto`: Chrome trace-event JSON (Perfetto, ``chrome://tracing``): a counter
  track per device for allocated and reserved, instant events for the findings;
* :mod:`.parquet`: the model's frames (events, blocks, ...) as Parquet, Arrow types kept;
* :mod:`.report`: one self-contained HTML page (inline SVG curves, every finding, the top
  stacks at the peak; two captures aligned), drawn by :mod:`.svg`.

Each writes as it goes, a bounded chunk at a time, never a second copy of the events.
They read the model and the analyses' results; nothing here parses a capture.
"""
