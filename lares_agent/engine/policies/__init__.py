"""The policy a run hands over, once it is a file: its format and loader (``policy_artefact.py``), deterministic
episodes of it (``policy_eval.py``, `lares eval`) and one episode of it rendered to a GIF/MP4 (``video.py``).
Public names: ``lares_agent.engine``."""
