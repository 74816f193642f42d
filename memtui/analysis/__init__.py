"""Pure functions over MemoryTrace frames: levels, summaries, state at a time, findings.

Nothing here imports textual or reads a file.
"""
