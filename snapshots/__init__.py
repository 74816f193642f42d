"""Demo captures written by benchmarks/generate.py (installed as memtui.snapshots)."""
