"""What the loop (``engine/loop/``) and the populations (``engine/populations/``) share, below both: the run's
config (``config.py``, with its elite selection's and diversity's settings), the diversity measure, the grading
of slots and learners (``fitness.py``), the slot arithmetic (``slots.py``) and the learner groups of a slot
(``groups.py``). Nothing here imports either folder."""
