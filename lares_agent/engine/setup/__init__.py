"""What the loop (``engine/loop/``) and the populations (``engine/populations/``) share, below both: the run's
diversity thresholds, and (as they move here) its config, slot arithmetic, learner groups and grading. Neither
folder's modules are imported from here."""
