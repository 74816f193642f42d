"""The Textual app (screens, widgets, the shared cursor). Never parses a file."""
