"""ES learners: the OpenAI-ES strategy, policies, rollout workers, the per-slot learner and its backends
(in process, or Ray actors: ``ray_backend``, imported only when chosen). Public names: ``lares_agent.engine``."""
