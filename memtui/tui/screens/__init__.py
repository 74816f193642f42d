"""The screens of the memtui app."""
