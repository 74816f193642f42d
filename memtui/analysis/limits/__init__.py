"""Memory limits a capture must keep (:mod:`.check`): the figures of ``memtui check``,
compared with limits and a baseline. The verdict's text lives in :mod:`memtui.text.check`."""
