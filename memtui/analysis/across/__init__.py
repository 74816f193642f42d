"""Across captures: two runs aligned and their deltas attributed (:mod:`.compare`), many
ranks side by side with their outliers (:mod:`.ranks`)."""
