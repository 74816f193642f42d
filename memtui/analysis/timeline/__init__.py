"""Levels and time: allocated / active / reserved over the trace (:mod:`.levels`), the
state at one moment (:mod:`.at_time`, :mod:`.state`), sampled series and downsampling
(:mod:`.series`, :mod:`.downsample`), block lifetimes as intervals (:mod:`.intervals`,
:mod:`.live`: the per-device index the screens share) and memory layers (:mod:`.layers`)."""
