"""Gradient learners on the shared replay buffer: the SAC and CrossQ references, their batched populations
(`make_population` builds the one a config asks for), the running observation normaliser and the networks.
Public names: ``lares_agent.engine``."""
