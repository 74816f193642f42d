"""Tests of memtui/analysis/: hand-built traces with known answers, and properties."""
