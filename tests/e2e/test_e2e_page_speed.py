"""studio/page_speed's patch of gradio's page: in place before gradio builds its component tree, it keeps the page
from handing every widget's unchanged loading status back to the tree on every event (half a second of the
browser's CPU per event on this page; bench/page_events.py measures it), and the page still answers: a pasted
LLaMA-Factory YAML fills the form, the Start button comes back, the language switches."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.e2e.conftest import import_lf_yaml, open_tab

CORE_JS = """async () => {
  const named = (n) => /\\/assets\\/core-[^/]*\\.js/.test(n);
  const url = performance.getEntriesByType('resource').map(e => e.name).find(named);
  const m = await import(url);
  return {quiet: !!m.AppTree.prototype.__studio_quiet, skipped: m.AppTree.studio_skipped || 0};
}"""


def test_unchanged_loading_statuses_are_skipped_and_the_page_still_answers(page, server):
    page.wait_for_selector("#start-btn:not([disabled])", timeout=90_000)
    first = page.evaluate(CORE_JS)
    assert first["quiet"], first
    # the dashboard's timers tick on their own: each tick hands back statuses gradio already drew, now skipped
    page.wait_for_function(
        f"async () => (await ({CORE_JS})()).skipped > {first['skipped']}", timeout=90_000, polling=500
    )
    model = server.home / "models" / "demo-tiny-llama"
    import_lf_yaml(
        page,
        f"model_name_or_path: {model}\nstage: sft\nfinetuning_type: lora\ndataset: demo_alpaca\n"
        "template: default\ncutoff_len: 96\nlearning_rate: 3.0e-4\nmax_steps: 7\n",
    )
    expect(page.locator("#f-train-max-steps input")).to_have_value("7", timeout=90_000)
    expect(page.locator("#f-data-cutoff-len input").first).to_have_value("96", timeout=90_000)
    page.wait_for_selector("#start-btn:not([disabled])", timeout=90_000)
    page.click("#lang-picker input")
    page.get_by_role("option", name="中文").click()
    expect(page.locator("#start-btn")).to_contain_text("开始训练", timeout=90_000)
    expect(page.locator("#f-train-max-steps input")).to_have_value("7")


# Counts the animation frames gradio's status trackers ask for (their module is the only caller named so in the
# stack), and when the last one was asked for.
TRACKER_FRAMES = """(() => {
  const raf = window.requestAnimationFrame.bind(window);
  window.__tracker_frames = {n: 0, last: 0};
  window.requestAnimationFrame = (cb) => {
    if ((new Error().stack || '').includes('statustracker')) {
      window.__tracker_frames.n += 1;
      window.__tracker_frames.last = performance.now();
    }
    return raf(cb);
  };
})()"""


def test_a_status_timer_stops_when_its_event_ends(browser, server):
    """gradio's status trackers count a pending event's seconds in an animation-frame loop; on this page the loops
    ran on after their events had ended, a frame every ~16 ms for as long as the page stayed open (10-13% of a core
    on an idle page). Served as studio/page_speed rewrites it, a loop ends with its event: after the page's load
    events and its timers' ticks have run loops, half a second passes with no frame asked for between two ticks."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        ctx.add_init_script(TRACKER_FRAMES)
        pg = ctx.new_page()
        pg.goto(server.url)
        pg.wait_for_selector("#start-btn:not([disabled])", timeout=90_000)
        pg.wait_for_function("() => window.__tracker_frames.n > 0", timeout=90_000)
        pg.wait_for_function(
            "() => window.__tracker_frames.n > 0 && performance.now() - window.__tracker_frames.last > 500",
            timeout=90_000,
            polling=100,
        )
    finally:
        ctx.close()


def test_page_load_writes_no_console_errors(browser, server):
    """Issue 45 item 20: five "Cannot read properties of null (reading 'offsetWidth')" per load. The page is loaded,
    its load handlers answered (Start enabled, the Runs tab's table drawn), every tab opened once: no error in the
    browser's console, no uncaught exception."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    try:
        pg.set_default_timeout(90_000)
        pg.goto(server.url)
        pg.wait_for_selector("#start-btn:not([disabled])", timeout=120_000)
        for name in ("Datasets", "Models", "Evaluate", "Export", "Chat", "Doctor", "Runs"):
            open_tab(pg, name)
        pg.wait_for_selector("#runs-table", timeout=90_000)
        assert errors == [], errors
    finally:
        ctx.close()
