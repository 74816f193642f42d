"""Where the bytes lie: pools and segments at an event (:mod:`.pool_state`), the block
lifetime map (:mod:`.block_map`) and address search (:mod:`.addresses`)."""
