"""The shared replay buffer and how a reward becomes one of its columns: the buffer (``buffer.py``), the fixed map
from a reward's raw values to stored ones (``column_map.py``), the scale a run's first rewards start at
(``reward_gain.py``), and rewards written as potentials, which read the buffer's previous rows (``potential.py``)."""
