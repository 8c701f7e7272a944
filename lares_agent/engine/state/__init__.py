"""What a run keeps on disk of the engine: atomic, pickle-free checkpoint directories (``checkpoint.py``)."""
