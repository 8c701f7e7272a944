"""What a run keeps on disk of the engine: atomic, pickle-free checkpoint directories (``checkpoint.py``), the
engine state's version and the checks that read it back (``schema.py``), and the run log that writes events,
metrics rows and checkpoints (``log.py``). Below ``loop/`` and ``populations/``: the loop writes through it, and
``populations/__init__.py`` reads a checkpoint back before it builds the engine."""
