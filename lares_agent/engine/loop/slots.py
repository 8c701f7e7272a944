"""The reward-population update of the LaRes engine (docs/lares-reference.md §3, §5-7; docs/DESIGN.md §1).

Every ``reward_period`` env steps: evaluate every learner, rank the slots by fitness (success rate minus
lambda x complexity, then the setting's tie-break, then lower complexity), keep the top E, ask the ``propose``
hook for the other slots, and for each accepted candidate relabel its column over the whole buffer, scale it
to the best elite's mean/std, and let its learner inherit the best learner with an L2 pull toward it. A
candidate the buffer rejects (constant or non-finite on the stored steps) is logged and skipped: its slot
keeps its reward and learner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from lares_agent.engine.errors import RewardColumnError
from lares_agent.engine.loop.fitness import UpdateContext, rank_slots, slot_evaluation
from lares_agent.engine.loop.config import EngineError
from lares_agent.engine.contracts import HUMAN_REWARD_FEATURE

if TYPE_CHECKING:
    from lares_agent.engine.loop.sac_engine import LaResEngine

__all__ = ["RewardUpdateMixin"]


class RewardUpdateMixin:
    """Reward-update methods of :class:`LaResEngine` (kept apart so the loop module stays readable)."""

    def _update_due(self: LaResEngine) -> bool:
        cfg = self.config
        if cfg.setting == "baseline" or cfg.reward_period <= 0:
            return False
        if cfg.max_rounds is not None and self.round >= cfg.max_rounds:
            return False
        return self.env_steps - self.last_update_steps >= cfg.reward_period

    def reward_update(self: LaResEngine) -> UpdateContext:
        """Evaluate, rank, refill non-elite slots via ``propose``, relabel + rescale + inherit (§3, §5-7)."""
        cfg = self.config
        evals = self.evaluate(range(self.num_learners), cfg.update_eval_episodes, keep_rollouts=cfg.rollouts_kept)
        use_task_return = cfg.setting != "scratch" and self.task.has_human_reward
        slots = [
            slot_evaluation(evals[i], self.rewards[i], cfg.complexity_lambda, use_task_return, i in self.quarantined)
            for i in range(self.num_slots)
        ]
        ranking = rank_slots(slots)
        if slots[ranking[0]].quarantined:
            raise EngineError("every slot is quarantined (non-finite); no learner can be inherited from")
        best = ranking[0]
        elites = tuple(ranking[: cfg.elites])
        refill = tuple(sorted(ranking[cfg.elites :]))
        ctx = UpdateContext(
            round=self.round + 1,
            env_steps=self.env_steps,
            setting=cfg.setting,
            slots=tuple(slots),
            ranking=tuple(ranking),
            elites=elites,
            refill=refill,
            rewards=tuple(self.rewards[: self.num_slots]),
            rollouts={s: evals[s].rollouts for s in ranking[: cfg.rollout_slots]},
            feature_sample=self._feature_sample(cfg.feature_sample),
        )
        proposals = list(self.propose(ctx)) if self.propose is not None else []
        if len(proposals) > len(refill):
            raise EngineError(f"propose returned {len(proposals)} rewards for {len(refill)} slots")
        replaced: dict[int, str] = {}
        for slot, fn in zip(refill, proposals, strict=False):
            try:
                affine = self.buffer.set_column(slot, fn, reference=best if cfg.scale_to_best else None,
                                                relabel=cfg.relabel)
            except RewardColumnError as exc:
                self._event({"event": "candidate_rejected", "round": ctx.round, "slot": slot,
                             "reward_id": fn.id, "reason": exc.reason})
                continue
            self.rewards[slot] = fn
            replaced[slot] = fn.id
            self._event({"event": "candidate_accepted", "round": ctx.round, "slot": slot, "reward_id": fn.id,
                         "scale": affine.scale, "shift": affine.shift})
        for slot in refill:
            # A reward that went NaN/inf on new steps must not survive an update that brought no candidate for
            # its slot (it would quarantine the reset learner again at once): the slot shares the best slot's
            # reward, as an unusable initial reward does at warm-up, until a later update refills it.
            if slot not in replaced and self.buffer.nonfinite_count[slot] > 0:
                shared = self.rewards[best]
                self.buffer.set_column(slot, shared, reference=best if cfg.scale_to_best else None,
                                       relabel=cfg.relabel)
                self.rewards[slot] = shared
                replaced[slot] = shared.id
                self._event({"event": "reward_shared", "round": ctx.round, "slot": slot, "reward_id": shared.id,
                             "reason": "its reward was NaN/inf on new steps and no valid candidate arrived"})
        # A quarantined learner is reset from the best even when its reward is kept (its weights are NaN).
        inherit = sorted(set(replaced) | {q for q in self.quarantined if q < self.num_slots and q != best})
        if inherit:
            self.population.inherit(inherit, best, cfg.anchor_weight)
        self.population.release_anchor([i for i in range(self.num_learners) if i not in inherit])
        # Every quarantined slot was just reset; only a diverged extra (env-reward) learner stays out.
        self.quarantined -= set(inherit)
        self.ts.reset()
        self.round = ctx.round
        self.last_update_steps = self.env_steps
        self.best_slot = best
        self._event({
            "event": "reward_update", "round": self.round, "env_steps": self.env_steps,
            "fitness": {str(s.slot): s.fitness for s in slots}, "ranking": list(ranking),
            "elites": list(elites), "best": best, "replaced": {str(k): v for k, v in replaced.items()},
            "inherited": inherit, "slots": [s.to_json() for s in slots],
        })
        self._log_evaluation("update", evals)
        self.save_checkpoint(name=f"round-{self.round:04d}")
        return ctx

    def _feature_sample(self: LaResEngine, n: int) -> dict[str, np.ndarray]:
        """Random stored rows (copies) of every feature, for numeric validation of proposals."""
        view = self.buffer.feature_view()
        size = len(self.buffer)
        idx = np.sort(self.rng.choice(size, size=min(n, size), replace=False)) if size else np.zeros(0, np.int64)
        drop = {HUMAN_REWARD_FEATURE} if self.config.setting == "scratch" else set()
        return {k: np.asarray(v[idx], np.float64) for k, v in view.items() if k not in drop}
