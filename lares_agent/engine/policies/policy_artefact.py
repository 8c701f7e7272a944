"""The trained policy as a file `torch` alone can load: build it from an engine state, act from it.

`torch.load(path, weights_only=True)` of a policy file gives one flat dict of plain tensors and
str/int/float/list metadata, so the policy can be used without lares:

- ``format`` ("lares-policy/1"), ``learner`` (sac | crossq | es), ``task``, ``reward_id``, ``slot``,
  ``env_steps``, ``round``, ``layers`` (number of linear layers), ``hidden_activation`` (relu | tanh);
- ``actor.{i}.weight`` [in, out] and ``actor.{i}.bias`` [out] for i < layers: the deterministic actor,
  y = x @ W + b, the hidden activation between layers and ``tanh`` after the last. For SAC and CrossQ it is
  the member's slice of the population's stacked weights [K, in, out] with only the mean half of the head
  (the first act_dim columns): the deterministic action is tanh(mean);
- CrossQ with batch renormalisation in the actor: ``actor.{i}.renorm.{scale,shift,mean,var}`` [in] and
  ``renorm_eps``; before layer i, x = scale * (x - mean) / sqrt(var + eps) + shift (eval mode: the running
  statistics);
- ``obs_mean``, ``obs_std`` [obs_dim] and ``obs_clip`` when the learner normalised observations:
  x = clip((obs - mean) / std, -clip, clip) before the first layer;
- ``action_low``, ``action_high`` [act_dim]: the env's Box; env action = low + (a + 1) / 2 * (high - low);
- a policy a run handed over on fresh episodes (``engine/loop/handover.py``) also carries ``handover_episodes``,
  ``handover_slots``, ``handover_reward_ids``, ``handover_ranks`` (place in the fitness ranking, -1: none yet),
  ``handover_success`` (one per candidate, in fitness order) and ``handover_ranked_first`` (read back by
  ``runs.handover.HandoverRecord.from_policy``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from lares_agent.engine.errors import EngineError
from lares_agent.runs import RunLayout

__all__ = ["POLICY_FORMAT", "PolicyArtefact", "artefact_from_state", "save_artefact", "slot_member", "write_policies"]

POLICY_FORMAT = "lares-policy/1"
_ES_NORM_EPS = 1e-8  # engine/es/policies.py RunningNorm.apply


def _torch_actor(population: Mapping[str, Any], member: int, act_dim: int, renorm: bool) -> dict[str, Any]:
    """Member's actor from a SAC/CrossQ population state: per layer W [K, in, out], b [K, 1, out]
    (CrossQ with renorm: scale, shift, W, b per layer; running mean, var per layer)."""
    params: list[Tensor] = list(population["actor"])
    per = 4 if renorm else 2
    layers = len(params) // per
    out: dict[str, Any] = {"layers": layers, "hidden_activation": "relu"}
    for i in range(layers):
        p = params[per * i : per * (i + 1)]
        w, b = p[-2][member].detach().clone(), p[-1][member, 0].detach().clone()
        if i == layers - 1:
            w, b = w[:, :act_dim].contiguous(), b[:act_dim].contiguous()
        out[f"actor.{i}.weight"], out[f"actor.{i}.bias"] = w, b
        if renorm:
            running = population["actor_running"]
            out[f"actor.{i}.renorm.scale"] = p[0][member, 0].detach().clone()
            out[f"actor.{i}.renorm.shift"] = p[1][member, 0].detach().clone()
            out[f"actor.{i}.renorm.mean"] = running[2 * i][member, 0].detach().clone()
            out[f"actor.{i}.renorm.var"] = running[2 * i + 1][member, 0].detach().clone()
    norm = population.get("obs_norm")
    if norm is not None:
        count = int(norm["count"])
        var = np.asarray(norm["m2"], np.float64) / count if count > 0 else np.ones(int(norm["dim"]))
        out["obs_mean"] = torch.as_tensor(np.asarray(norm["mean"]), dtype=torch.float32)
        out["obs_std"] = torch.as_tensor(np.sqrt(var + float(norm["eps"])), dtype=torch.float32)
        out["obs_clip"] = float(norm["clip"])
    return out


def _es_actor(learner: Mapping[str, Any], hidden: list[int], normalize: bool) -> dict[str, Any]:
    """An ES slot's policy (the search mean, float64) as per-layer [in, out] weights."""
    params = np.asarray(learner["es"]["mean"], np.float64)
    norm = learner["norm"]
    obs_dim = int(np.asarray(norm["mean"]).size)
    sizes_wo_out = [obs_dim, *hidden]
    inner = sum(sizes_wo_out[i] * sizes_wo_out[i + 1] + sizes_wo_out[i + 1] for i in range(len(hidden)))
    act_dim = (params.size - inner) // (sizes_wo_out[-1] + 1)
    sizes = [*sizes_wo_out, act_dim]
    out: dict[str, Any] = {"layers": len(sizes) - 1, "hidden_activation": "tanh"}
    k = 0
    for i in range(len(sizes) - 1):  # flat layout of policies.py: W [out, in] row-major, then b
        n_w = sizes[i] * sizes[i + 1]
        w = params[k : k + n_w].reshape(sizes[i + 1], sizes[i])
        k += n_w
        out[f"actor.{i}.weight"] = torch.as_tensor(w.T.copy())
        out[f"actor.{i}.bias"] = torch.as_tensor(params[k : k + sizes[i + 1]].copy())
        k += sizes[i + 1]
    if normalize:
        out["obs_mean"] = torch.as_tensor(np.array(norm["mean"], np.float64))  # a copy: the source may be read-only
        out["obs_std"] = torch.as_tensor(np.sqrt(np.asarray(norm["var"], np.float64) + _ES_NORM_EPS))
        out["obs_clip"] = float(norm["clip"])
    return out


def artefact_from_state(state: Mapping[str, Any], member: int, action_low: np.ndarray, action_high: np.ndarray,
                        reward_id: str, slot: int | None = None) -> dict[str, Any]:
    """The policy file's dict for one learner of an engine state (``LaResEngine.state_dict()``, a checkpoint's, or
    the smaller one ``save_policy`` passes; only ``learner``, ``task``, ``config``, ``counters`` and
    ``population["learners"]`` are read). ``slot``: the reward slot it stands for (default: ``member``)."""
    if "learners" not in state["config"]:
        raise EngineError("this engine state was written by an older lares (checkpoint version < 3); its policy "
                          "files still load, but a policy cannot be cut from the checkpoint itself")
    learner, config = str(state["learner"]), state["config"]["learners"]
    learners = state["population"]["learners"]
    if learner == "es":
        if not 0 <= member < len(learners):
            raise EngineError(f"slot {member} does not exist (the run has slots 0..{len(learners) - 1})")
        normalize = bool(config.get("es", {}).get("normalize_obs", True))
        actor = _es_actor(learners[member], [int(h) for h in config.get("hidden", ())], normalize)
    else:
        if not 0 <= member < int(learners["k"]):
            raise EngineError(f"slot {member if slot is None else slot} does not exist (the run has learners "
                              f"0..{int(learners['k']) - 1})")
        renorm = learner == "crossq" and bool(config.get("crossq", {}).get("actor_renorm", True))
        actor = _torch_actor(learners, member, int(learners["act_dim"]), renorm)
        if renorm:
            actor["renorm_eps"] = float(config["crossq"]["renorm_eps"])
    counters = state.get("counters", {})
    dtype = actor["actor.0.weight"].dtype
    return {
        "format": POLICY_FORMAT, "learner": learner, "task": str(state["task"]), "reward_id": reward_id,
        "slot": int(member if slot is None else slot), "env_steps": int(counters.get("env_steps", 0)),
        "round": int(counters.get("round", 0)),
        **actor,
        "action_low": torch.as_tensor(np.asarray(action_low, np.float64), dtype=dtype),
        "action_high": torch.as_tensor(np.asarray(action_high, np.float64), dtype=dtype),
    }


def save_artefact(artefact: Mapping[str, Any], path: Path) -> Path:
    """Write atomically (a temporary file renamed over the target)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(dict(artefact), tmp)
    tmp.replace(path)
    return path


def write_policies(layout: RunLayout, name: str, state: Mapping[str, Any], best: int, low: np.ndarray,
                   high: np.ndarray, reward_ids: Sequence[str], every_slot: bool = False,
                   members: Sequence[int] | None = None, extra: Mapping[str, Any] | None = None) -> Path:
    """``policies/<name>.pt`` for the slot handed over, ``best``; with ``every_slot`` also ``slot-<k>.pt`` for
    every slot (a few actor weights each: cheap). ``members[k]``: the learner that stands for slot k (its leader,
    with several learners per reward; default k). ``extra``: metadata the selected file carries besides (the
    hand-over's, ``runs/handover.py``). Returns the selected policy's path."""
    member = list(members) if members is not None else list(range(len(reward_ids)))
    selected = artefact_from_state(state, member[best], low, high, reward_ids[best], slot=best)
    path = save_artefact({**selected, **(extra or {})}, layout.policy(name))
    if every_slot:
        for slot, reward_id in enumerate(reward_ids):
            save_artefact(artefact_from_state(state, member[slot], low, high, reward_id, slot=slot),
                          layout.slot_policy(slot))
    return path


def slot_member(state: Mapping[str, Any], slot: int) -> int:
    """The learner of an engine state that stands for ``slot``: its leader at the last reward update with several
    learners per reward (``LaResEngine.state_dict()["leaders"]``), else the slot itself."""
    leaders = state.get("leaders")
    if leaders and 0 <= slot < len(leaders):
        return int(leaders[slot][0])
    return slot


@dataclass(frozen=True)
class PolicyArtefact:
    """A loaded policy file: metadata and a deterministic forward (torch only, no learner code)."""

    data: Mapping[str, Any]

    @classmethod
    def load(cls, path: str | Path) -> PolicyArtefact:
        """Read a policy file (tensors only: `weights_only=True`); one line when it is not one."""
        try:
            data = torch.load(Path(path), map_location="cpu", weights_only=True)
        except FileNotFoundError:
            raise EngineError(f"policy file {path} does not exist") from None
        except Exception as exc:
            raise EngineError(f"{path} is not a readable policy file ({type(exc).__name__}: {exc})") from None
        if not isinstance(data, dict) or data.get("format") != POLICY_FORMAT:
            raise EngineError(f"{path} is not a lares policy file (format {POLICY_FORMAT!r})")
        return cls(data)

    @property
    def learner(self) -> str:
        return str(self.data["learner"])

    @property
    def task(self) -> str:
        return str(self.data["task"])

    @property
    def reward_id(self) -> str:
        return str(self.data["reward_id"])

    @torch.no_grad()
    def act(self, obs: np.ndarray) -> np.ndarray:
        """Deterministic actions in [-1, 1] for observations [N, obs_dim] (the learner's `act(...,
        deterministic=True)`)."""
        d = self.data
        weight0: Tensor = d["actor.0.weight"]
        x = torch.as_tensor(np.asarray(obs), dtype=weight0.dtype).reshape(-1, weight0.shape[0])
        if "obs_mean" in d:
            clip = float(d["obs_clip"])
            x = ((x - d["obs_mean"]) / d["obs_std"]).clamp(-clip, clip)
        layers = int(d["layers"])
        hidden = torch.relu if d["hidden_activation"] == "relu" else torch.tanh
        for i in range(layers):
            if f"actor.{i}.renorm.scale" in d:
                factor = d[f"actor.{i}.renorm.scale"] * torch.rsqrt(d[f"actor.{i}.renorm.var"] + d["renorm_eps"])
                x = torch.addcmul(d[f"actor.{i}.renorm.shift"] - d[f"actor.{i}.renorm.mean"] * factor, x, factor)
            x = x @ d[f"actor.{i}.weight"] + d[f"actor.{i}.bias"]
            x = hidden(x) if i < layers - 1 else torch.tanh(x)
        return np.asarray(x.numpy(), np.float64)

    def env_action(self, obs: np.ndarray) -> np.ndarray:
        """`act` mapped onto the env's Box (as `engine.rollouts.episodes.to_env_action`)."""
        a = np.clip(self.act(obs), -1.0, 1.0)
        low = self.data["action_low"].double().numpy()
        high = self.data["action_high"].double().numpy()
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
            return np.asarray(a)
        return np.asarray(low + (a + 1.0) * 0.5 * (high - low))

    @property
    def trained_on_human_reward(self) -> bool:
        """Whether the policy learned from the task's own reward (the init setting's human-reward learner), not
        from a searched one."""
        return self.reward_id == "human"  # contracts.HumanReward.id

    def summary(self) -> str:
        """One line: learner, task, reward (and whether it is the task's own), slot, steps, round."""
        d = self.data
        reward = "the task's own reward" if self.trained_on_human_reward else f"searched reward {d['reward_id']}"
        return (f"{d['learner']} policy for {d['task']} (slot {d['slot']}, trained on {reward}, "
                f"{d['env_steps']} env steps, round {d['round']})")

