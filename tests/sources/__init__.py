"""Tests of memtui/sources/: each format on tiny hand-made files and on ../shared/data."""
