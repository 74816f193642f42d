"""Widgets shared by the screens: the status bar, the trend plot, the virtual table."""
