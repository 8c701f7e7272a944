"""The LaRes loop, written once: the engine (run, step, reward update, evaluation log, checkpoints), its config,
the reward slots, fitness, selection, the proposal runner and the run log. What learns lives in
``engine/populations/``; the public names are exported by ``lares_agent.engine``."""
