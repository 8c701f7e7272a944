"""The report's video of the policy a run hands over: rendered for real off screen on a MetaWorld run (a machine
that cannot render fails here; `make system-deps` installs what EGL needs), embedded in index.html, left out with
--no-video, and replaced by one line when rendering fails. Also the GL backend choice, EGL then OSMesa."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import assert_real_gif
from typer.testing import CliRunner

from lares_agent.cli.app import app
from lares_agent.engine import VideoError
from lares_agent.engine.policies import video as engine_video
from lares_agent.report.html import write_report
from lares_agent.report.video import VIDEO_NAME
from lares_agent.runs import FINAL_POLICY, RunLayout

pytestmark = pytest.mark.usefixtures("one_torch_thread")

HORIZON = 40  # a short episode keeps the test fast: 21 frames


def lares(*args: str, home: Path) -> Any:
    return CliRunner().invoke(app, list(args), env={"LARES_HOME": str(home), "COLUMNS": "240"})


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished reach-v3 baseline (a few hundred steps: the video needs a policy file, not a good policy), its
    episodes cut to HORIZON steps in config.json, which the report's episode follows as `lares eval` does."""
    base = tmp_path_factory.mktemp("video")
    result = lares("baseline", "--task", "reach-v3", "--learner", "sac", "--budget", "200", "--no-report",
                   "--run-dir", str(base / "runs"), home=base)
    assert result.exit_code == 0, result.output
    (folder,) = [p for p in (base / "runs").iterdir() if p.is_dir()]
    config = RunLayout(folder).config
    config.write_text(json.dumps({**json.loads(config.read_text()), "horizon": HORIZON}))
    return folder


def _section(page: str) -> str:
    found = re.search(r'<(figure|p)[^>]* id="policy-video">.*?</\1>', page, re.S)
    assert found, "no policy-video section"
    return found.group(0)


def test_the_report_embeds_a_rendered_episode_of_the_handed_over_policy(run: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MUJOCO_GL", raising=False)  # the backend is chosen by lares (EGL first), not by the test
    result = lares("report", str(run), home=tmp_path)
    assert result.exit_code == 0, result.output
    page = (run / "report" / "index.html").read_text()
    section = _section(page)
    assert section.startswith("<figure") and f'<img src="{VIDEO_NAME}"' in section, section
    frames = assert_real_gif(run / "report" / VIDEO_NAME)
    assert len(frames) == HORIZON // 2 + 1 and frames[0].shape == (160, 160, 3)
    assert "from policies/final.pt" in section and f"{HORIZON} steps" in section and "MUJOCO_GL=" in section


def test_no_video_leaves_the_section_and_the_file_out(run: Path, tmp_path: Path) -> None:
    copy = tmp_path / run.name
    shutil.copytree(run, copy)
    (copy / "report").mkdir(exist_ok=True)
    (copy / "report" / VIDEO_NAME).write_bytes(b"GIF89a stale")
    result = lares("report", str(copy), "--no-video", home=tmp_path)
    assert result.exit_code == 0, result.output
    assert 'id="policy-video"' not in (copy / "report" / "index.html").read_text()
    assert not (copy / "report" / VIDEO_NAME).exists()
    result = lares("report", "--sweep", str(tmp_path), "--no-video", home=tmp_path)
    assert result.exit_code != 0 and "--no-video is for a run's report" in result.output


def test_a_run_without_a_policy_has_no_video_section(run: Path, tmp_path: Path) -> None:
    copy = tmp_path / run.name
    shutil.copytree(run, copy)
    RunLayout(copy).policy(FINAL_POLICY).unlink()
    for stale in RunLayout(copy).policies.glob("round-*"):
        stale.unlink()
    assert 'id="policy-video"' not in write_report(copy).read_text()


def test_a_render_that_fails_is_one_line_in_the_report(run: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any, **__: Any) -> Any:
        raise VideoError("MuJoCo cannot render off screen here (egl: no display); install Debian's libegl1")

    monkeypatch.setattr("lares_agent.engine.record_video", refuse, raising=False)  # what report/video.py calls
    copy = tmp_path / run.name
    shutil.copytree(run, copy)
    section = _section(write_report(copy).read_text())
    assert section.startswith('<p class="note"') and "No video of final.pt: MuJoCo cannot render" in section
    assert "libegl1" in section and not (copy / "report" / VIDEO_NAME).exists()


@pytest.fixture
def fresh_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """No backend chosen or refused yet, no MUJOCO_GL, no display: what a fresh `lares` process starts with."""
    monkeypatch.setattr(engine_video, "_chosen", None)
    monkeypatch.setattr(engine_video, "_refused", None)
    monkeypatch.setenv("MUJOCO_GL", "")  # set, then removed: the test's own choice is undone afterwards
    monkeypatch.delenv("MUJOCO_GL")
    for name in ("DISPLAY", "PYOPENGL_PLATFORM"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("fresh_choice")
def test_egl_is_tried_first_then_osmesa(monkeypatch: pytest.MonkeyPatch) -> None:
    tried: list[str] = []

    def probe(backend: str) -> str | None:
        tried.append(backend)
        return None if backend == "osmesa" else "eglInitialize failed"

    monkeypatch.setattr(engine_video, "_probe", probe)
    assert engine_video.gl_backend() == "osmesa" and tried == ["egl", "osmesa"]
    assert engine_video.gl_backend() == "osmesa" and tried == ["egl", "osmesa"]  # remembered, not probed again
    assert os.environ["MUJOCO_GL"] == "osmesa"


@pytest.mark.usefixtures("fresh_choice")
def test_no_backend_is_one_line_naming_the_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_video, "_probe", lambda backend: f"{backend} library not found")
    with pytest.raises(VideoError) as err:
        engine_video.gl_backend()
    text = str(err.value)
    assert "\n" not in text and "egl: egl library not found" in text and "osmesa: osmesa library not found" in text
    assert engine_video.GL_PACKAGES["egl"] in text and "make system-deps" in text
