"""What the loop (``engine/loop/``) and the populations (``engine/populations/``) share, below both: the run's
config (``config.py``, with its elite selection's and diversity's settings) and the diversity measure. Nothing
here imports either folder."""
