"""What keeps a run from silently meaning something else: the verl sources pinned by hash (:mod:`.verl_pins`), the
fingerprint of what a checkpointed posterior means (:mod:`.fingerprint`), and the resume checks (:mod:`.resume`)."""
