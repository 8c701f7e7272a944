"""``report/index.html``: one self-contained page (inline CSS, no scripts, no network) next to its PNGs.

Every string that came from a run (reward expressions, rationales, ids: LLM text among them) is escaped:
LLM text is data, and a report must not become a script because a model wrote ``<script>``.
"""

from __future__ import annotations

import html
import math
import os
from collections.abc import Callable
from pathlib import Path

from lares_agent.report.plots import plot_influence, plot_lineage, plot_llm_cost, plot_return, plot_success
from lares_agent.report.proxy import proxy_rows, spearman
from lares_agent.report.summary import RunSummary, summarize
from lares_agent.report.video import VIDEO_NAME, ReportVideo, policy_video
from lares_agent.runs import RunLayout, RunLog, llm_health
from lares_agent.runs.reader import RunData, read_run
from lares_agent.search.options import LLM_FREE_ABLATIONS

__all__ = ["FIGURES", "render_html", "write_report"]

# (file name, caption): the caption says how to read the figure.
FIGURES: tuple[tuple[str, str], ...] = (
    (
        "success.png",
        "Success rate of each learner's deterministic evaluation episodes over env steps; black is the best learner "
        "at each evaluation, dashed grey the mean, dotted verticals the reward updates; in the init setting, green "
        "dash-dots are the learner kept on the task's own reward (black and grey are then the searched rewards' "
        "learners alone); a baseline run, if compared, is red.",
    ),
    (
        "return.png",
        "Task (environment) return per episode of each learner over env steps, same lines as above: higher is better, "
        "and success without return (or the reverse) points at a reward that pays for the wrong thing.",
    ),
    (
        "lineage.png",
        "Reward population per round: one box per slot and reward update, colour is fitness, text gives the reward "
        "id, fitness and complexity, and what the fitness was made of: the success rate once any policy succeeds at "
        "that update, before that the share of the start distance closed (progress; approach when the progress "
        "shares tie); between equal ones the task return, then the simpler reward ranks higher; "
        "thick frames survived as elites, red dashed ones were replaced by the id after the arrow; the star marks "
        "the best.",
    ),
    (
        "influence.png",
        "What the best reward pays for: each component's share of |reward| and, when a feature sample was saved, "
        "each feature's gradient influence; one dominant bar means the other terms barely matter.",
    ),
    (
        "llm_cost.png",
        "LLM cost per graph node over the whole run: tokens (prompt and completion stacked) and wall seconds with "
        "the mean per call.",
    ),
)

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:.3em .6em;text-align:left;
vertical-align:top}th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.best{background:#fff7d6}code{font-size:.85em;white-space:pre-wrap}.note{color:#8a4b00;font-weight:600}
figure{margin:1.2em 0}figure img{max-width:100%;border:1px solid #eee}figcaption{color:#555;font-size:.9em}
"""


def _num(x: float | int | None, fmt: str = "{:.2f}") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return fmt.format(x)


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "–"
    h, rem = divmod(round(seconds), 3600)
    m, s = divmod(rem, 60)
    return f"{seconds:.0f} s ({h}h {m:02d}m {s:02d}s)"


def _summary_rows(s: RunSummary) -> list[tuple[str, str, str]]:
    """(key, label, value) rows of the summary table; the key becomes the row's id for tools and tests."""
    at = f" at {s.best_success_steps} env steps" if s.best_success_steps is not None else ""
    return [
        ("task", "task", s.task),
        ("setting", "setting", s.setting),
        ("budget", "budget (env steps)", _num(s.budget, "{:d}")),
        ("env_steps", "env steps reached", _num(s.env_steps, "{:d}")),
        ("evaluations", "evaluations / reward updates", f"{s.n_evaluations} / {s.n_updates}"),
        ("best_success", "best success (population max over evaluations)", _num(s.best_success) + at),
        ("final_success", "final success (best / mean of learners)", f"{_num(s.final_best_success)} / "
         f"{_num(s.final_mean_success)}"),
        ("best_task_return", "best task return", _num(s.best_task_return, "{:.1f}")),
        ("fitness", "fitness rule (what each update was graded on)", _fitness_rule(s)),
        ("wall_time", "wall time", _duration(s.wall_s)),
        ("llm_tokens", "LLM tokens (prompt + completion)", f"{s.prompt_tokens} + {s.completion_tokens} = "
         f"{s.prompt_tokens + s.completion_tokens}"),
        ("llm_calls", "LLM calls / seconds", f"{s.llm_calls} / {s.llm_seconds:.1f} s"),
        ("candidates", "candidates accepted / rejected", f"{s.n_accepted} / {s.n_rejected}"),
        ("shaping", "reward form (--shaping)", s.shaping or "–"),
        ("best_reward", "best reward", s.best_reward_id or "–"),
        ("handed_over", "policy handed over (trained on)", s.handed_over or "–"),
        ("handover", "hand-over: top learners replayed on fresh episodes", s.handover or "– (the one ranked first)"),
        ("human_learner", "learner on the task's own reward vs best searched-reward learner (final success)",
         f"{_num(s.final_human_success)} vs {_num(s.final_best_success)}" if s.setting == "init" else "–"),
    ]


def _fitness_rule(s: RunSummary) -> str:
    """The rule and the grade of each update, consecutive rounds joined: "success-then-return: return at rounds
    1-3, success at rounds 4-9" (docs/DESIGN.md, "Graded fitness")."""
    spans: list[tuple[str, int, int]] = []  # (grade, first round, last round)
    for rnd, grade in s.grades:
        if spans and spans[-1][0] == grade:
            spans[-1] = (grade, spans[-1][1], rnd)
        else:
            spans.append((grade, rnd, rnd))
    parts = [f"{g} at round{'s' if a != b else ''} {a}{f'-{b}' if a != b else ''}" for g, a, b in spans]
    return f"{s.fitness_rule}: {', '.join(parts)}" if parts else s.fitness_rule


def _summary_table(run: RunSummary, baseline: RunSummary | None) -> str:
    e = html.escape
    head = f"<tr><th></th><th>{e(run.name)}</th>"
    head += f"<th>{e(baseline.name)} (baseline)</th></tr>" if baseline is not None else "</tr>"
    base_rows = {k: v for k, _, v in _summary_rows(baseline)} if baseline is not None else {}
    body = []
    for key, label, value in _summary_rows(run):
        extra = f"<td>{e(base_rows[key])}</td>" if baseline is not None else ""
        body.append(f'<tr id="{key}"><th>{e(label)}</th><td>{e(value)}</td>{extra}</tr>')
    return "<table>" + head + "".join(body) + "</table>"


def _population_table(s: RunSummary) -> str:
    e = html.escape
    if not s.population:
        return "<p>No reward population recorded yet.</p>"
    rows = ["<tr><th>slot</th><th>reward id</th><th>components</th><th>complexity</th><th>fitness</th>"
            "<th>last success</th></tr>"]
    for m in s.population:
        comps = "<br>".join(f"<code>{e(k)} = {e(v)}</code>" for k, v in m.components.items()) or "–"
        cls = ' class="best"' if m.reward_id == s.best_reward_id else ""
        rows.append(
            f"<tr{cls}><td class=num>{m.slot}</td><td>{e(m.reward_id)}</td><td>{comps}</td>"
            f"<td class=num>{_num(m.complexity, '{:.1f}')}</td>"
            f"<td class=num>{_num(m.fitness, '{:.3f}')}{_breakdown(m.breakdown)}</td>"
            f"<td class=num>{_num(m.last_success)}</td></tr>"
        )
    return "<table>" + "".join(rows) + "</table>"


def _breakdown(text: str) -> str:
    return f"<br><small>({html.escape(text)})</small>" if text else ""
def _proxy_table(run: RunData) -> str:
    """Each pre-screened candidate's proxy score and the fitness it later earned, and their Spearman correlation."""
    e = html.escape
    rows = proxy_rows(run)
    if not rows:
        return "<p>No candidate carries a pre-screen score (older run, or the pre-screen was off).</p>"
    rho, n = spearman(rows)
    corr = (f"Spearman correlation of proxy and fitness over {n} evaluated candidates: {_num(rho)}" if rho is not None
            else f"Too few evaluated candidates ({n}) for a correlation.")
    body = ["<tr><th>id</th><th>round</th><th>proxy</th><th>fitness later</th></tr>"]
    for r in rows:
        body.append(f"<tr><td>{e(r.id)}</td><td class=num>{_num(r.round, '{}')}</td>"
                    f"<td class=num>{_num(r.proxy)}</td><td class=num>{_num(r.fitness, '{:.3f}')}</td></tr>")
    return f'<p id="proxy-spearman">{e(corr)}</p><table id="proxy">' + "".join(body) + "</table>"


def _graph_section() -> str:
    """The round graph as LangGraph draws it (`lares graph`), as Mermaid text: readable as it is, and drawn by any
    Mermaid viewer; the page itself loads no script, so it needs no network."""
    from lares_agent.graphs.drawing import round_graph_mermaid

    return ("<p>Every reward round runs this LangGraph graph (dotted edges are conditional; `lares graph` prints "
            "it, docs/ARCHITECTURE.md explains the routing). The Mermaid text below is drawn by any Mermaid "
            'viewer.</p><pre class="mermaid" id="round-graph">' + html.escape(round_graph_mermaid()) + "</pre>")


def _video_section(video: ReportVideo) -> str:
    """The GIF with what it shows, or the one line saying why this machine wrote none (never a broken image)."""
    e = html.escape
    if video.file is None:
        return f'<p class="note" id="policy-video">{e(video.caption)}</p>'
    return (f'<figure id="policy-video"><img src="{e(video.file)}" alt="an episode of the policy handed over">'
            f"<figcaption>{e(video.caption)}</figcaption></figure>")


def _notes_section(run: RunData) -> str:
    """The user's notes (`lares feedback`) and the round whose critique took each; "" where there are none."""
    e = html.escape
    notes = RunLog(run.path).feedback.read()
    if not notes:
        return ""
    taken = {str(ev.get("note")): ev.round for ev in run.events if ev.event == "feedback"}
    rows = ["<tr><th>note</th><th>taken by round</th><th>text</th></tr>"]
    for n in notes:
        when = str(taken[n.id]) if n.id in taken else "not yet (the next round takes it)"
        rows.append(f"<tr><td>{e(n.id)}</td><td>{e(when)}</td><td>{e(n.text)}</td></tr>")
    return ("<h2>Your notes to the reward rounds</h2><p>Each note reached one round's critique as a defect of its "
            'own (<code>lares feedback</code>; <code>lares trace --round R</code> shows that round).</p>'
            '<table id="notes">' + "".join(rows) + "</table>")


def render_html(run: RunData, figures: list[str], baseline: RunData | None = None,
                video: ReportVideo | None = None) -> str:
    """The page for ``run``; ``figures`` are the PNG file names (relative to the page) that were written, ``video``
    the handed-over policy's episode (or why there is none)."""
    e = html.escape
    s = summarize(run)
    b = summarize(baseline) if baseline is not None else None
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        f"<title>lares report: {e(s.name)}</title><style>{_CSS}</style></head><body>",
        f"<h1>lares report: {e(s.name)}</h1>",
    ]
    if baseline is not None:
        parts.append(f"<p>Compared with baseline run <b>{e(baseline.name)}</b>.</p>")
    health = llm_health(RunLog(run.path))
    asked = not any(a in LLM_FREE_ABLATIONS for a in run.config.get("ablations") or ())  # a control asks it nothing
    if health.only_fallbacks and asked:
        parts.append(f'<p class="note"><b>The LLM delivered no reward.</b> {e(health.sentence())}.</p>')
    if not run.evaluations:
        parts.append('<p class="note">No evaluations yet: the run has not reached its first evaluation '
                     "(or was stopped before it), so there are no learning curves.</p>")
    parts += ["<h2>Summary</h2>", _summary_table(s, b)]
    if video is not None:
        parts += ["<h2>The policy handed over, in one episode</h2>", _video_section(video)]
    notes = _notes_section(run)
    if notes:
        parts.append(notes)
    parts += ["<h2>Final reward population</h2>", _population_table(s)]
    parts += ["<h2>Pre-screen proxy against fitness</h2>", _proxy_table(run)]
    if s.setting != "baseline":  # a baseline run asks no LLM: it has no round graph
        parts += ["<h2>Round graph</h2>", _graph_section()]
    captions = dict(FIGURES)
    if figures:
        parts.append("<h2>Figures</h2>")
    for name in figures:
        parts.append(
            f'<figure><img src="{e(name)}" alt="{e(name)}"><figcaption>{e(captions.get(name, ""))}'
            "</figcaption></figure>"
        )
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_report(run: str | Path, compare: str | Path | None = None, out_dir: str | Path | None = None,
                 video: bool = True) -> Path:
    """Write ``<run>/report/index.html``, its PNGs and (``video``) the GIF of the handed-over policy; returns the
    page's path.

    Raises ``NotARunError`` (one line) if ``run`` or ``compare`` is not a run directory. Figures without data
    are left out (and an old PNG of that name is removed, so the folder never shows a stale figure).
    """
    data = read_run(run)
    baseline = read_run(compare) if compare is not None else None
    out = Path(out_dir) if out_dir is not None else RunLayout(data.path).report
    out.mkdir(parents=True, exist_ok=True)
    makers: dict[str, Callable[[], Path | None]] = {
        "success.png": lambda: plot_success(data, out, baseline),
        "return.png": lambda: plot_return(data, out, baseline),
        "lineage.png": lambda: plot_lineage(data, out),
        "influence.png": lambda: plot_influence(data, out),
        "llm_cost.png": lambda: plot_llm_cost(data, out),
    }
    written = []
    for name, _ in FIGURES:
        path = makers[name]()
        if path is not None:
            written.append(path.name)
        elif (out / name).exists():
            (out / name).unlink()
    page = out / "index.html"
    tmp = out / ".index.html.tmp"
    clip = policy_video(data, out) if video else None
    if not video:
        (out / VIDEO_NAME).unlink(missing_ok=True)  # the page will not show it: no stale video beside it
    tmp.write_text(render_html(data, written, baseline, clip), encoding="utf-8")
    os.replace(tmp, page)
    return page
