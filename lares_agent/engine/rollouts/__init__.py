"""Playing episodes: lock-step episodes and env pools, vector-env rollouts, deterministic evaluation and the
one random-action sampler. The engine's public names are exported by ``lares_agent.engine``."""
