"""Gradient learners on the shared replay buffer: the SAC reference, the batched SAC population and their
networks. Public names: ``lares_agent.engine``."""
