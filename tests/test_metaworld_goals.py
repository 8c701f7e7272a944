"""MetaWorld 3.1.1 asserts that the 50 goals MT1 draws are distinct, and once in a while they are not: the env is
built again instead of the run failing (engine/tasks/metaworld.py, make_metaworld_env)."""

from __future__ import annotations

from typing import Any

import gymnasium
import pytest

from lares_agent.engine.tasks import metaworld as mw

pytest.importorskip("metaworld")


def _failing_first(monkeypatch: pytest.MonkeyPatch, message: str) -> list[int]:
    real, calls = gymnasium.make, []

    def make(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise AssertionError(message)
        return real(*args, **kwargs)

    monkeypatch.setattr(gymnasium, "make", make)
    return calls


def test_a_draw_of_repeated_goals_is_drawn_again(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _failing_first(monkeypatch, "Only generated 49 unique goals, not 50")
    env = mw.make_metaworld_env("reach-v3", 20, seed=3)
    try:
        obs, _ = env.reset(seed=0)
        assert len(calls) == 2 and obs.shape[0] >= 39
    finally:
        env.close()


def test_another_assertion_is_not_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _failing_first(monkeypatch, "something else")
    with pytest.raises(AssertionError, match="something else"):
        mw.make_metaworld_env("reach-v3", 20, seed=3)
    assert len(calls) == 1
