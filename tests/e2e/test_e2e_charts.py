"""The charts as the user sees them (issue 13): every series of every chart is drawn in a visible colour under a
named legend entry, read from the Vega SVG in Chromium: the live Loss chart at the end of a run (every logged point),
the Runs overlay of two runs (one line per run, named by the run), the length histogram's bars and cutoff line, the
resource charts titled by what this machine has (RAM / CPU load here), and the Doctor table (hidden until it has
results, within the page). Screenshots go to test-artifacts/.

Vega draws asynchronously after a handler's text output changes: every check waits for the condition it asserts."""

from __future__ import annotations

import json
import re
import time
import uuid
import warnings

import pytest
from playwright.sync_api import expect

from studio import alerts, monitor
from studio.tabs import data
from tests.e2e.conftest import finished_run, import_lf_yaml, pick_run, type_field

pytestmark = pytest.mark.slow  # a real server, runs and browser

# What a Vega SVG plot shows: its lines (points, stroke), bars (fill) and legend (the labels not cut off, title).
SVG_JS = """(sel) => {
  const root = document.querySelector(sel);
  if (!root) return null;
  const paint = (el, attr, css) => {
    const cs = getComputedStyle(el), value = el.getAttribute(attr);
    const visible = value && !['none', 'transparent'].includes(value) && cs[css] !== 'none'
      && !/rgba\\(.*,\\s*0\\)$/.test(cs[css]) && parseFloat(cs[css + 'Opacity'] || '1') > 0;
    return {color: (value || '').toLowerCase(), visible: !!visible};
  };
  const lines = [...root.querySelectorAll('g.mark-line path')].map(p => ({
    points: ((p.getAttribute('d') || '').match(/[ML]/g) || []).length, ...paint(p, 'stroke', 'stroke')}));
  const bars = [...root.querySelectorAll('g.mark-rect path')].map(p => paint(p, 'fill', 'fill'));
  const bottom = root.getBoundingClientRect().bottom + 1;  // the block clips what lies below it
  const legend = [...root.querySelectorAll('g.role-legend-label text')]
    .filter(t => t.getBoundingClientRect().bottom <= bottom).map(t => t.textContent);
  const title = [...root.querySelectorAll('g.role-legend-title text')].map(t => t.textContent).join(' ');
  return {lines, bars, legend, title};
}"""


def svg(page, selector: str) -> dict | None:
    return page.evaluate(SVG_JS, selector)


def wait_svg(page, selector: str, check: str, timeout_ms: int = 60_000) -> dict | None:
    """Wait until ``check`` (a JS expression of ``s``, the SVG_JS reading) holds; return the last reading either way
    (the caller's asserts then say what was drawn)."""
    try:
        page.wait_for_function(
            f"(sel) => {{ const s = ({SVG_JS})(sel); return !!s && ({check}); }}", arg=selector, timeout=timeout_ms
        )
    except Exception:  # noqa: BLE001 - the assertions below report what the plot drew
        pass
    return svg(page, selector)


def lines_match(expected: dict[str, int], extra: list[tuple[str, int]] = ()) -> str:
    """JS check: one visible line per legend entry, of the given colour and number of points; legend = the keys
    (``extra``: more (colour, points) lines whose colour another line may share, e.g. alert marks)."""
    pairs = [*expected.items(), *extra]
    return (
        f"(() => {{ const want = {json.dumps(pairs)};"
        " const drawn = s.lines.filter(l => l.visible).map(l => l.color + ':' + l.points).sort();"
        " const wanted = want.map(([c, n]) => c + ':' + n).sort();"
        " return JSON.stringify(drawn) === JSON.stringify(wanted) && s.lines.length === wanted.length"
        " && s.legend.length === wanted.length; })()"
    )


def _tab(page, name: str) -> None:
    page.get_by_role("tab", name=name).click()


def _fill(page, widget: str, value: str) -> None:
    type_field(page, f"#{widget} input", value)


def start_run(page, name: str, steps: int, val_size: str = "0", eval_steps: str = "500", lr: str = "0.0002") -> str:
    """Start a named run of ``steps`` steps from the Train form; its id."""
    page.wait_for_selector("#start-btn:not([disabled])", timeout=60_000)
    if not page.locator("#f-output-run-name input").is_visible():
        page.click("#sec-output >> text=Output")
    _fill(page, "f-output-run-name", name)
    _fill(page, "f-train-max-steps", str(steps))
    _fill(page, "f-train-learning-rate", lr)
    _fill(page, "f-data-val-size", val_size)
    if not page.locator("#f-train-eval-steps input").is_visible():
        page.locator("#sec-train").get_by_text("Advanced", exact=True).first.click()
    _fill(page, "f-train-eval-steps", eval_steps)
    page.wait_for_selector("#start-btn:not([disabled])", timeout=90_000)
    id_re = r"\d{8}-\d{6}-[0-9a-f]+"
    before = re.findall(id_re, page.inner_text("#action-msg"))  # a second run's page still names the first one
    page.click("#start-btn")
    page.wait_for_function(
        "([re, before]) => { const s = document.querySelector('#action-msg').innerText;"
        " const m = s.match(new RegExp('Started run (' + re + ')'));"
        " return !!m && !before.includes(m[1]); }",
        arg=[id_re, before],
        timeout=90_000,
    )
    return re.search(f"Started run ({id_re})", page.inner_text("#action-msg")).group(1)


def wait_logged(server, run_id: str, timeout: float = 300.0) -> None:
    """Until the run's events file holds its first logged step: the trainer is training (its stop handler in place).
    A chart on the page may still show the run picked before, so a drawn line alone does not say this."""
    path = server.home / "runs" / run_id / "events.jsonl"
    deadline = time.time() + timeout
    while time.time() < deadline:
        text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
        if any('"type": "log"' in line or '"type":"log"' in line for line in text.splitlines()):
            return
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} logged no step in {timeout} s: {text[-1500:]}")


def wait_finished(page, run_id: str, timeout_ms: int = 300_000) -> None:
    page.wait_for_function(
        f"(() => {{ const s = document.querySelector('#run-status').innerText;"
        f" return s.includes('{run_id}') && (s.includes('completed') || s.includes('failed')); }})",
        timeout=timeout_ms,
    )
    assert "completed" in page.inner_text("#run-status"), page.inner_text("#run-status")


def refresh_runs_until(page, ready, timeout_s: float = 120) -> None:
    """Press the Runs tab's Refresh until ``ready`` holds for the table's row texts (as a person presses it again)."""
    deadline = time.time() + timeout_s
    while True:
        page.click("#runs-refresh")
        page.wait_for_timeout(1_500)  # between polls of the condition
        rows = page.locator("#runs-table").get_by_role("row").all_inner_texts()
        if ready(rows):
            return
        assert time.time() < deadline, rows


def logged(server, run_id: str) -> tuple[int, int]:
    """(loss points, eval points) the run wrote to its events file."""
    evs = [json.loads(line) for line in (server.home / "runs" / run_id / "events.jsonl").read_text().splitlines()]
    losses = sum(1 for e in evs if e["type"] == "log" and (e.get("payload") or {}).get("loss") is not None)
    return losses, sum(1 for e in evs if e["type"] == "eval")


def test_live_loss_chart_draws_every_point_and_resource_charts_say_cpu(page, server, shots, fits_width):
    """Watched live from its start (the plot is first drawn before any loss exists, and the eval curve joins
    midway), the run's Loss chart ends with one coloured line per legend entry holding every logged point."""
    run_id = start_run(page, f"live-{uuid.uuid4().hex[:6]}", steps=16, val_size="0.2", eval_steps="5")
    wait_finished(page, run_id)
    steps, evals = logged(server, run_id)
    assert steps >= 10 and evals >= 2, (steps, evals)
    colors = monitor.loss_colors("en")
    want = {colors["train loss"]: steps, colors["train loss (smoothed)"]: steps, colors["eval loss"]: evals}
    # A health rule may fire on a busy machine (throughput): each alert is a 2-point red mark with its own legend
    # entry, read here from the run's events.
    marks = run_alerts(server, run_id)
    extra = [(alerts.ALERT_COLOR, 2)] * len(marks)
    drawn = wait_svg(page, "#plot-loss", lines_match(want, extra))
    page.screenshot(path=str(shots / "charts-live-loss.png"), full_page=True)
    legend = sorted(["eval loss", "train loss", "train loss (smoothed)"] + [alerts.mark_name(a) for a in marks])
    assert drawn and sorted(drawn["legend"]) == legend, drawn
    assert all(line["visible"] for line in drawn["lines"]), drawn["lines"]
    assert sorted(f"{line['color']}:{line['points']}" for line in drawn["lines"]) == sorted(
        f"{c}:{n}" for c, n in [*want.items(), *extra]
    ), drawn["lines"]
    assert drawn["title"] == "curve"

    # This machine has no GPU: the resource charts say what they show, and draw it.
    expect(page.locator("#plot-gpu-mem")).to_contain_text("RAM: all the run's processes", timeout=90_000)
    expect(page.locator("#plot-gpu-util")).to_contain_text("CPU load", timeout=90_000)
    assert "GPU" not in page.inner_text("#plot-gpu-mem") + page.inner_text("#plot-gpu-util")
    for plot, label in (("#plot-gpu-mem", "CPU RAM (run)"), ("#plot-gpu-util", "CPU")):
        drawn = wait_svg(page, plot, f"s.legend.includes({json.dumps(label)}) && s.lines.some(l => l.visible)")
        assert drawn and label in drawn["legend"] and all(line["visible"] for line in drawn["lines"]), drawn
    page.locator("#plot-gpu-mem").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "charts-resources-cpu.png"))
    assert fits_width(page)

    # The same chart in Chinese: the legend's names follow the language, the lines stay.
    shown = page.inner_text("#action-msg")  # what Start said, as the page shows it before the switch
    page.click("#lang-picker input")
    page.get_by_role("option", name="中文").click()
    zh = {monitor.loss_colors("zh")[k]: n for k, n in zip(("训练损失", "训练损失（平滑）", "验证损失"), want.values())}
    drawn = wait_svg(page, "#plot-loss", lines_match(zh, extra) + " && s.legend.includes('训练损失')")
    legend = sorted(["训练损失", "训练损失（平滑）", "验证损失"] + [alerts.mark_name(a, "zh") for a in marks])
    assert drawn and sorted(drawn["legend"]) == legend, drawn
    assert all(line["visible"] for line in drawn["lines"]) and len(drawn["lines"]) == 3 + len(marks), drawn
    expect(page.locator("#plot-gpu-mem")).to_contain_text("本运行全部进程的常驻内存 (MiB)", timeout=90_000)
    # what Start said before the switch is said again in Chinese (issue 27 item 12). Once in a clean-clone run
    # (2026-12-04) the page said, after "Started run X", that X with this very spec was already running: a second
    # Start request reached the server while X ran, with one click in this test. Not explained yet (noted on issue
    # 27); the message the page showed is the one checked, and the anomaly is reported in the warnings summary.
    # The server's log has a line per Start request, and says what each answered (when a second one came, too)
    starts = [line for line in server.log.read_text(errors="replace").splitlines() if "studio.start" in line]
    assert any(f"run {run_id} running" in line or f"run {run_id} queued" in line for line in starts), starts
    if "Started run" in shown:
        expect(page.locator("#action-msg")).to_contain_text(f"已启动运行 {run_id}", timeout=90_000)
    else:
        assert f"Run {run_id} with this very spec is already" in shown, shown
        warnings.warn(f"a second Start request after one click: the page said {shown!r}; {starts}", stacklevel=1)
        expect(page.locator("#action-msg")).to_contain_text(f"配置完全相同的运行 {run_id}", timeout=90_000)
    assert "Started run" not in page.inner_text("#action-msg") and "Run " not in page.inner_text("#action-msg")
    page.locator("#plot-loss").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "charts-live-loss-zh.png"))


def run_alerts(server, run_id: str) -> list[dict]:
    """The run's health alerts, from its events file, as the page reads them."""
    return alerts.read_alerts(server.home / "runs" / run_id)


def stage_counts(server, run_id: str) -> tuple[int, int]:
    """(log events, eval events) of the run that carry TRL's rewards."""
    evs = [json.loads(line) for line in (server.home / "runs" / run_id / "events.jsonl").read_text().splitlines()]
    logs = sum(1 for e in evs if e["type"] == "log" and "rewards/margins" in (e["payload"].get("metrics") or {}))
    return logs, sum(1 for e in evs if e["type"] == "eval" and "eval_rewards/margins" in e["payload"])


def test_dpo_run_draws_its_rewards_margin_and_accuracy(page, server, shots, fits_width):
    """A dpo run (from a pasted LLaMA-Factory YAML) shows its rewards and its accuracy, two charts hidden for runs
    without them: one coloured line per figure TRL logs, train and eval, each named in the legend, in English and
    Chinese."""
    for plot in ("#plot-stage-rewards", "#plot-stage-accuracy"):
        expect(page.locator(plot)).to_be_hidden()  # no run chosen yet
    model = str(server.home / "models" / "demo-tiny-llama")
    page.wait_for_selector("#start-btn:not([disabled])", timeout=60_000)
    import_lf_yaml(
        page,
        f"model_name_or_path: {model}\nstage: dpo\nfinetuning_type: lora\nlora_target: all\ndataset: demo_dpo\n"
        "template: default\ncutoff_len: 64\nlogging_steps: 1\nper_device_train_batch_size: 4\neval_strategy: steps\n",
    )
    run_id = start_run(page, f"dpo-{uuid.uuid4().hex[:6]}", steps=4, val_size="0.1", eval_steps="2", lr="0.005")
    logs, evals = 4, 2  # a log every step, an eval every 2: the charts hold them all once the run has ended
    colors = monitor.stage_colors("en")
    for plot, names in (
        ("#plot-stage-rewards", ["chosen", "rejected", "margin"]),
        ("#plot-stage-accuracy", ["accuracy"]),
    ):
        names = {**dict.fromkeys(names, logs), **{f"{n} (eval)": evals for n in names}}
        want = {colors[n]: k for n, k in names.items()}
        drawn = wait_svg(page, plot, lines_match(want), timeout_ms=180_000)
        assert stage_counts(server, run_id) == (logs, evals), stage_counts(server, run_id)
        assert drawn and sorted(drawn["legend"]) == sorted(names), drawn
        assert sorted(f"{line['color']}:{line['points']}" for line in drawn["lines"]) == sorted(
            f"{c}:{n}" for c, n in want.items()
        ), drawn["lines"]
        assert all(line["visible"] for line in drawn["lines"]), drawn["lines"]
    expect(page.locator("#plot-stage-rewards")).to_contain_text("Rewards of chosen / rejected answers")
    expect(page.locator("#plot-stage-accuracy")).to_contain_text("Accuracy: chosen scored above rejected")
    page.locator("#plot-stage-rewards").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "charts-dpo-figures.png"))
    assert fits_width(page)

    page.click("#lang-picker input")
    page.get_by_role("option", name="中文").click()
    drawn = wait_svg(page, "#plot-stage-rewards", "s.legend.includes('被选') && s.lines.every(l => l.visible)")
    assert drawn and sorted(drawn["legend"]) == sorted(
        ["被选", "被拒", "差值", "被选（验证）", "被拒（验证）", "差值（验证）"]
    )
    expect(page.locator("#plot-stage-accuracy")).to_contain_text("准确率：被选回答得分高于被拒回答")
    page.locator("#plot-stage-rewards").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "charts-dpo-figures-zh.png"))


def test_runs_overlay_names_and_colours_each_run(page, server, shots, fits_width):
    """Two runs picked by name (the picker shows name, status, start and final loss) draw two coloured lines whose
    legend entries are the runs' names."""
    tag = uuid.uuid4().hex[:6]
    names = [f"overlay-a-{tag}", f"overlay-b-{tag}"]
    ids = []
    for name, lr in zip(names, ("0.0002", "0.002")):  # two learning rates: two curves apart
        ids.append(start_run(page, name, steps=6, lr=lr))
        wait_finished(page, ids[-1])
    _tab(page, "Runs")
    # The registry calls a run completed once its wrapper has exited, a moment after the dashboard saw it finish.
    refresh_runs_until(page, lambda rows: all(any(n in r and "completed" in r for r in rows) for n in names))
    compare = page.locator("#runs-compare input")
    compare.click()
    for name, rid in zip(names, ids):
        compare.fill(name)  # the picker filters its labels by what is typed (Escape would empty its list)
        option = page.locator("[role=option]", has_text=name)
        expect(option).to_have_count(1, timeout=90_000)
        label = option.inner_text()
        assert "completed" in label and re.search(r"loss \d", label) and rid in label, label
        assert re.search(r"\d\d-\d\d \d\d:\d\d", label), label  # when it started
        option.click()
    page.click("#runs-diff")  # closes the picker
    steps = [logged(server, rid)[0] for rid in ids]
    drawn = wait_svg(
        page,
        "#runs-overlay",
        "s.legend.length === 2 && s.lines.length === 2 && s.lines.every(l => l.visible)"
        f" && s.lines.map(l => l.points).sort((a, b) => a - b).join() === '{','.join(map(str, sorted(steps)))}'",
    )
    page.locator("#runs-overlay").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "charts-runs-overlay.png"))
    assert drawn and sorted(drawn["legend"]) == sorted(names), drawn
    assert all(line["visible"] for line in drawn["lines"]) and len(drawn["lines"]) == 2, drawn
    assert len({line["color"] for line in drawn["lines"]}) == 2, drawn  # told apart by colour
    assert sorted(line["points"] for line in drawn["lines"]) == sorted(steps), (drawn, steps)
    assert drawn["title"] == "Run"
    assert fits_width(page)


# The tick labels a Vega plot shows (those its overlap rule hides have opacity 0), and the points of its lines.
TICKS_JS = """(sel) => {
  const root = document.querySelector(sel);
  if (!root) return null;
  const shown = t => getComputedStyle(t).opacity !== '0' && t.getAttribute('opacity') !== '0';
  const labels = axis => [...root.querySelectorAll(`g.role-axis g[aria-label*="${axis}"] g.role-axis-label text,
      g.role-axis[aria-label*="${axis}"] g.role-axis-label text`)].filter(shown).map(t => t.textContent);
  const all = [...root.querySelectorAll('g.role-axis-label text')].filter(shown).map(t => t.textContent);
  const points = [...root.querySelectorAll('g.mark-line path')]
    .map(p => ((p.getAttribute('d') || '').match(/[ML]/g) || []).length);
  return {x: labels('X-axis'), y: labels('Y-axis'), all, points};
}"""

SIX_DECIMALS = re.compile(r"\.\d{5,}$")


def one_point_ticks(page, selector: str) -> dict:
    """The plot's ticks once it draws its one point with ticks on both axes none of which has six decimals."""
    check = (
        f"(() => {{ const s = ({TICKS_JS})(sel); return !!s && s.points.length === 1 && s.points[0] === 1"
        " && s.x.length >= 2 && s.y.length >= 2 && !s.all.some(t => /\\.\\d{5,}$/.test(t)); })()"
    )
    try:
        page.wait_for_function(f"(sel) => {check}", arg=selector, timeout=90_000)
    except Exception:  # noqa: BLE001 - the assertions below say what the plot drew
        pass
    return page.evaluate(TICKS_JS, selector)


DOT_JS = """(sel) => {
  const p = document.querySelector(sel + ' g.mark-line path');
  if (!p) return null;
  const d = p.getAttribute('d') || '';
  const m = /M\\s*([-\\d.e]+)[ ,]\\s*([-\\d.e]+)/.exec(d);
  if (!m) return {d};
  const at = new DOMPoint(+m[1], +m[2]).matrixTransform(p.getScreenCTM());
  const rgb = (getComputedStyle(p).stroke.match(/\\d+/g) || []).slice(0, 3).map(Number);
  return {d, x: at.x, y: at.y, rgb};
}"""


def dot_pixels(page, selector: str) -> tuple[dict, int]:
    """Where the plot's one point is on the screen and how many pixels of its series' colour a screenshot of the
    12 x 12 px around it holds: what a person sees there, read from the pixels, not from the SVG's attributes."""
    import io

    from PIL import Image

    dot = page.evaluate(DOT_JS, selector)
    if not dot or "x" not in dot or len(dot.get("rgb") or []) != 3:
        return dot or {}, 0
    png = page.screenshot(clip={"x": dot["x"] - 6, "y": dot["y"] - 6, "width": 12, "height": 12})
    img = Image.open(io.BytesIO(png)).convert("RGB")
    raw = img.tobytes()
    pixels = [raw[i : i + 3] for i in range(0, len(raw), 3)]
    near = sum(1 for px in pixels if all(abs(a - b) <= 40 for a, b in zip(px, dot["rgb"], strict=True)))
    return dot, near


@pytest.fixture(scope="module")
def one_step_run(server) -> tuple[str, str]:
    """(id, name) of a completed run of one step in the server's workspace, for the tests that read its charts and
    figures (one training run for both; the form's Start is what the other tests here start runs with)."""
    name = f"one-{uuid.uuid4().hex[:6]}"
    return finished_run(server.home, name), name


def test_a_one_point_chart_ticks_a_range_around_its_point(page, server, shots, one_step_run):
    """Issue 27 item 15: a run of one step draws one point per chart; Vega ticked its zero-width axes "1.000000" and
    "8.900000". The dashboard's charts and the Runs overlay of that run tick a range around the point instead."""
    run_id, name = one_step_run
    pick_run(page, run_id)
    wait_finished(page, run_id)
    assert logged(server, run_id) == (1, 0)
    for plot in ("#plot-loss", "#plot-lr", "#plot-grad-norm"):
        page.locator(plot).scroll_into_view_if_needed()
        drawn = one_point_ticks(page, plot)
        assert drawn and drawn["points"] == [1], (plot, drawn)
        assert len(drawn["x"]) >= 2 and len(drawn["y"]) >= 2, (plot, drawn)  # a range on each axis, not one tick
        assert not [t for t in drawn["all"] if SIX_DECIMALS.search(t)], (plot, drawn)
        assert "1" in {t.rstrip("0").rstrip(".") for t in drawn["x"]}, (plot, drawn)  # step 1 among the ticks
        dot, seen = dot_pixels(page, plot)  # the point itself is drawn: a line of one point has no length
        assert seen >= 12, (plot, dot, seen)
    page.locator("#plot-loss").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "charts-one-point.png"))

    _tab(page, "Runs")
    page.click("#runs-refresh")
    compare = page.locator("#runs-compare input")
    compare.click()
    compare.fill(name)
    option = page.locator("[role=option]", has_text=name)
    expect(option).to_have_count(1, timeout=90_000)
    option.click()
    page.click("#runs-diff")  # closes the picker
    drawn = one_point_ticks(page, "#runs-overlay")
    page.locator("#runs-overlay").scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "charts-one-point-overlay.png"))
    assert drawn and drawn["points"] == [1] and len(drawn["x"]) >= 2 and len(drawn["y"]) >= 2, drawn
    assert not [t for t in drawn["all"] if SIX_DECIMALS.search(t)], drawn
    dot, seen = dot_pixels(page, "#runs-overlay")
    assert seen >= 12, (dot, seen)


def test_each_memory_figure_says_which_processes_it_counts(page, server, shots, one_step_run):
    """Issue 27 item 15: the Runs table's peak (622 MiB) and the dashboard's RAM chart (~870 MiB) differed without
    saying what each counts. The chart's title names all the run's processes; the table's column is the trainer's
    peak and the note under it says what that is and why the charts read higher, in English and Chinese."""
    run_id, _name = one_step_run
    pick_run(page, run_id)
    wait_finished(page, run_id)
    expect(page.locator("#plot-gpu-mem")).to_contain_text("RAM: all the run's processes, resident (MiB)")
    _tab(page, "Runs")
    table = page.locator("#runs-table")
    expect(table.get_by_role("columnheader", name="trainer peak MiB")).to_be_visible(timeout=90_000)
    # The row by the run's id: twice in CI (2 cores, busy) a run started from the form was recorded under the demo's
    # default name, the name typed into the form not taken (issue 29's note), and a row looked up by name never came.
    row = table.get_by_role("row").filter(has_text=run_id)
    refresh_runs_until(page, lambda rows: any(run_id in r for r in rows))
    expect(row).to_have_count(1)
    headers = table.get_by_role("columnheader").all_inner_texts()
    cells = row.get_by_role("gridcell").all_inner_texts()
    peak = cells[[h.strip() for h in headers].index("trainer peak MiB")].strip()
    assert peak.isdigit() and int(peak) > 0, (headers, cells)
    # every column in view at 1280 px, the last one too, without scrolling the table sideways
    edges = page.evaluate(
        """() => {
      const t = document.querySelector('#runs-table');
      const heads = [...t.querySelectorAll('[role=columnheader]')];
      const scrolled = [...t.querySelectorAll('*')].map(e => e.scrollLeft).reduce((a, b) => Math.max(a, b), 0);
      return {table: t.getBoundingClientRect().right, vw: window.innerWidth, scrolled,
              heads: heads.map(h => [h.innerText.trim(), h.getBoundingClientRect().right])};
    }"""
    )
    assert edges["scrolled"] == 0, edges
    off = [(n, r) for n, r in edges["heads"] if n and r > min(edges["table"], edges["vw"]) + 1]
    assert not off, edges
    note = page.locator("#runs-peak-note")
    expect(note).to_contain_text("trainer peak MiB: the most one training process reported")
    expect(note).to_contain_text("adds up every process of the run")
    box = page.evaluate(
        "() => { const n = document.querySelector('#runs-peak-note'), t = document.querySelector('#runs-table');"
        " return {note: n.getBoundingClientRect().top, table: t.getBoundingClientRect().bottom}; }"
    )
    assert box["note"] >= box["table"] - 1, box  # under the table it explains
    note.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "runs-peak-note.png"))

    page.click("#lang-picker input")
    page.get_by_role("option", name="中文").click()
    expect(note).to_contain_text("训练进程峰值 MiB：单个训练进程", timeout=90_000)
    expect(table.get_by_role("columnheader", name="训练进程峰值 MiB")).to_be_visible(timeout=90_000)
    page.get_by_role("tab", name="训练").click()
    expect(page.locator("#plot-gpu-mem")).to_contain_text("内存：本运行全部进程的常驻内存 (MiB)", timeout=90_000)


# What the length histogram shows (studio/histogram.py's SVG): each bar's fill and its left / right edge on screen,
# its tooltip, the cutoff line's x, the tick labels, the legend.
HIST_JS = """() => {
  const svg = document.querySelector('#ds-hist svg');
  if (!svg) return null;
  const box = r => r.getBoundingClientRect();
  const bars = [...svg.querySelectorAll('rect.bar')].map(r => ({
    fill: getComputedStyle(r).fill, left: box(r).left, right: box(r).right, height: box(r).height,
    tip: r.querySelector('title').textContent}));
  const line = svg.querySelector('line.cutoff');
  const ticks = [...svg.querySelectorAll('text.x-tick, text.y-tick')].map(t => t.textContent);
  const legend = [...document.querySelectorAll('#ds-hist .hist-key')].map(k => k.innerText.trim());
  return {cutoff: svg.dataset.cutoff, bars, line: line ? box(line).left + box(line).width / 2 : null, ticks,
          legend, note: (document.querySelector('#ds-hist-note')?.innerText ?? '')};
}"""


def _hist_at(page, cutoff: int) -> dict:
    """The histogram once it is drawn for ``cutoff`` (typed into the Train form, then the Datasets tab opened)."""
    _tab(page, "Train")
    _fill(page, "f-data-cutoff-len", str(cutoff))
    expect(page.locator("#f-data-cutoff-len input").first).to_have_value(str(cutoff))
    _tab(page, "Datasets")
    page.wait_for_function(
        f"(() => {{ const s = ({HIST_JS})(); return !!s && s.cutoff === '{cutoff}' && s.bars.length > 0"
        f" && s.note.includes('cutoff {cutoff} '); }})()",
        timeout=60_000,
    )
    page.locator("#ds-hist").scroll_into_view_if_needed()
    return page.evaluate(HIST_JS)


def _rgb(hex_color: str) -> str:
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


def test_length_histogram_bars_sides_and_cutoff_line(page, shots):
    """Issue 27 item 7: bars within the cutoff blue and left of the dashed cutoff line, bars over it red and right of
    it; a cutoff equal to the longest row draws no red bar (the note says 0 truncated); the red bars hold the rows the
    note counts as truncated; ticks are whole numbers."""
    page.set_default_timeout(120_000)  # a click waits for a renderer starved by a loaded machine
    within, over = _rgb(data.SIDE_COLORS["kept"]), _rgb(data.SIDE_COLORS["over_cutoff"])
    _tab(page, "Datasets")
    page.wait_for_function(
        f"(() => {{ const s = ({HIST_JS})(); return !!s && s.bars.length > 0; }})()", timeout=60_000
    )
    note = page.evaluate(HIST_JS)["note"]
    total, longest = (int(x) for x in re.search(r"(\d+) rows · max (\d+) tokens", note).groups())

    drawn = _hist_at(page, longest)  # every row fits: nothing red, every bar left of the line
    assert "(0 rows)" in drawn["note"], drawn["note"]
    assert drawn["bars"] and all(b["fill"] == within for b in drawn["bars"]), drawn["bars"]
    assert all(b["right"] <= drawn["line"] + 1 for b in drawn["bars"]), (drawn["line"], drawn["bars"])
    assert drawn["legend"] == ["within cutoff", f"cutoff {longest}"], drawn["legend"]

    cut = max(2, longest // 2)
    drawn = _hist_at(page, cut)
    page.screenshot(path=str(shots / "charts-length-histogram.png"))
    truncated = int(re.search(r"truncated\*?\*? \((\d+) rows\)", drawn["note"]).group(1))
    reds = [b for b in drawn["bars"] if b["fill"] == over]
    blues = [b for b in drawn["bars"] if b["fill"] == within]
    assert reds and blues and len(reds) + len(blues) == len(drawn["bars"]), drawn["bars"]
    assert all(b["left"] >= drawn["line"] - 1 for b in reds) and all(b["right"] <= drawn["line"] + 1 for b in blues)
    counted = [[int(x) for x in re.findall(r"\d+", b["tip"])] for b in drawn["bars"]]  # first, last, rows
    assert all(first > cut for first, _, _ in (counted[i] for i, b in enumerate(drawn["bars"]) if b in reds))
    assert all(last <= cut for _, last, _ in (counted[i] for i, b in enumerate(drawn["bars"]) if b in blues))
    assert sum(n for (_, _, n), b in zip(counted, drawn["bars"]) if b in reds) == truncated
    assert sum(n for _, _, n in counted) == total
    assert drawn["ticks"] and all(t.isdigit() for t in drawn["ticks"]), drawn["ticks"]
    assert drawn["legend"] == ["within cutoff", "over cutoff", f"cutoff {cut}"], drawn["legend"]


def test_doctor_table_hidden_until_run_then_fits(page, shots, fits_width):
    _tab(page, "Doctor")
    expect(page.locator("#doctor-run")).to_be_visible(timeout=90_000)
    expect(page.locator("#doctor-table")).to_be_hidden()
    page.screenshot(path=str(shots / "doctor-before.png"))
    page.click("#doctor-run")
    table = page.locator("#doctor-table")
    expect(table).to_be_visible(timeout=120_000)
    expect(table.get_by_role("gridcell", name="PASS").first).to_be_visible(timeout=120_000)
    assert table.get_by_role("row").count() >= 4  # the header and a row per check
    expect(table.get_by_role("columnheader", name="fix")).to_be_visible()
    page.screenshot(path=str(shots / "doctor.png"), full_page=True)
    # Every column, the fix column last, lies within the table and the page: nothing is cut off at the right.
    edges = page.evaluate(
        """() => { const t = document.querySelector('#doctor-table');
        const box = t.getBoundingClientRect();
        const cells = [...t.querySelectorAll('[role=columnheader], [role=gridcell]')]
          .map(c => c.getBoundingClientRect().right);
        return {right: box.right, cells: Math.max(...cells), width: window.innerWidth}; }"""
    )
    assert edges["cells"] <= edges["right"] + 1 and edges["right"] <= edges["width"], edges
    assert fits_width(page)
