"""Gradient learners on the shared replay buffer: the SAC and CrossQ references, their batched population
(`actor_critic.ActorCriticPopulation`, built by `make_population`), the running observation normaliser, the
networks, and the device they compute on (`devices.py`). Public names: ``lares_agent.engine``."""
