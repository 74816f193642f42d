"""Widgets of the memtui screens."""
