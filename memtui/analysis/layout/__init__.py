"""Where the bytes lie: pools and segments at an event (:mod:`.pool_state`; stepped from one
event to the next for the Pool screen, :mod:`.pool_walk`), the block
lifetime map (:mod:`.block_map`) and address search (:mod:`.addresses`)."""
