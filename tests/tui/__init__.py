"""Tests of memtui/tui/: Pilot behaviour, SVG snapshots, the real command in tmux."""
