"""The exported module of a reward written as a potential (`--shaping potential`, engine/replay/potential.py).

What the learners trained on is not the sum of the LLM's components but base + gamma*Phi(s') - Phi(s), with Phi
that sum standardised as the run fixed it at install. The module says so and computes exactly that: `potential`
and `base_reward` per row, `reward` over one episode's rows in order (Phi of the state before the first row is 0,
and Phi(s') is 0 only at a true terminal, as in training), and a wrapper that carries Phi from step to step.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from lares_agent.runs.events import Event

__all__ = ["PotentialForm", "potential_forms", "potential_source", "potential_wrapper"]

_BASE_FEATURES = {"success": "success", "human": "human_reward"}
"""The feature each base reward reads (search/potentials.py: the success indicator, or the task's own reward)."""


@dataclass(frozen=True)
class PotentialForm:
    """How a potential shaped its base reward in a run: the base's feature (`success` from scratch, `human_reward`,
    the env's own reward, with init), the learner's gamma and the standardisation (Phi - top) / spread."""

    base_feature: str
    gamma: float
    top: float
    spread: float

    def lines(self) -> list[str]:
        """The docstring's lines that say what the reward is."""
        base = ("the task's success indicator (1 where it is solved)" if self.base_feature == "success"
                else "the environment's own reward" if self.base_feature == "human_reward" else self.base_feature)
        return [
            "This is a POTENTIAL Phi: the learners trained on base + GAMMA*Phi(s') - Phi(s) (Ng, Harada and",
            f"Russell 1999), the base being {base}, GAMMA = {self.gamma!r}, and Phi the sum",
            f"below standardised as the run fixed it: (sum - {self.top!r}) / {self.spread!r}.",
            "reward(features, terminated) computes it over one episode's steps in order.",
        ]


def potential_forms(events: Iterable[Event]) -> dict[str, PotentialForm]:
    """Each potential reward's form, by reward id, from a run's `potential` events (the newest for an id)."""
    out: dict[str, PotentialForm] = {}
    for e in events:
        if e.event != "potential" or e.get("reward_id") is None:
            continue
        base = str(e.get("base"))
        out[str(e.get("reward_id"))] = PotentialForm(_BASE_FEATURES.get(base, base), float(e.get("gamma")),
                                                     float(e.get("top")), float(e.get("spread")))
    return out


def potential_source(form: PotentialForm) -> str:
    """The module's part after its components: the constants, `potential`, `base_reward` and `reward`."""
    return f'''
# --- the potential's shaping: what the learners trained on ---
GAMMA = {form.gamma!r}
PHI_TOP = {form.top!r}
PHI_SPREAD = {form.spread!r}
BASE_FEATURE = {form.base_feature!r}


def potential(features):
    """Phi per row [N]: the components' sum, standardised as lares fixed it at install."""
    return (potential_sum(features) - PHI_TOP) / PHI_SPREAD


def base_reward(features):
    """The base reward per row [N]: the BASE_FEATURE column."""
    return np.asarray(features[BASE_FEATURE], dtype=np.float64).reshape(-1)


def reward(features, terminated=None):
    """The shaped reward [N] of ONE episode's steps in order: base + GAMMA*Phi(s') - Phi(s).

    Row t's features are those of the state its step reached (s'); Phi(s) is the previous row's, and 0 before the
    episode's first row (lares' convention for the reset state). Phi(s') is 0 where `terminated` (a true end, not a
    time limit: a time limit keeps Phi of the state reached).
    """
    phi = np.asarray(potential(features), dtype=np.float64).reshape(-1)
    after = phi if terminated is None else np.where(np.asarray(terminated, dtype=bool), 0.0, phi)
    before = np.concatenate([[0.0], phi[:-1]])
    return base_reward(features) + GAMMA * after - before
'''


_STEP = "        def step(self, action):"
_RESET = "            self.episode_step = 0\n            self.reset_obs"
_POTENTIAL_STEP = '''        def step(self, action):
            obs, env_reward, terminated, truncated, info = self.env.step(action)
            self.episode_step += 1
            values = dict(self.features_fn(self, obs, info, action))
            values.setdefault("human_reward", env_reward)  # a base on the env's own reward reads it
            info = dict(info, env_reward=env_reward)
            return obs, self.reward(values, terminated), terminated, truncated, info

        def reward(self, values, terminated=False):
            columns = {name: np.asarray([values[name]], dtype=np.float64) for name in (*FEATURES, BASE_FEATURE)}
            phi = float(potential(columns)[0])
            shaped = float(base_reward(columns)[0]) + GAMMA * (0.0 if terminated else phi) - self.previous_phi
            self.previous_phi = phi  # Phi(s) of the next step
            return shaped
'''


def potential_wrapper(wrapper: str) -> str:
    """The additive module's Gymnasium wrapper made to carry Phi from step to step (0 after each reset)."""
    if _STEP not in wrapper or _RESET not in wrapper:
        raise ValueError("the export's wrapper changed: potential_wrapper cannot find its step and reset")
    head = wrapper[: wrapper.index(_STEP)]
    head = head.replace(_RESET, "            self.episode_step = 0\n            self.previous_phi = 0.0\n"
                                "            self.reset_obs")
    head = head.replace("Replaces the env's reward by `reward(...)` of this module.",
                        "Replaces the env's reward by the shaped reward: base + GAMMA*Phi(s') - Phi(s).")
    return head + _POTENTIAL_STEP
