"""Tests of the command line (memtui/cli.py, memtui/commands/) and the demo captures."""
