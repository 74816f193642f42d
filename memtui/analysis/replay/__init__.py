"""What if: replay a capture through PyTorch's caching allocator (:mod:`.allocator`), prove
the replay on the recorded addresses (:mod:`.proof`), then predict what a setting changes
(:mod:`.predict`).  :mod:`.run` feeds a device's events to the allocator; :mod:`.settings`
reads and changes the allocator's settings."""
