"""What a person sees of the page's layout (issue 27 item 15): the long Train form scrolls with the page, not in a
box of its own; the LLaMA-Factory upload widgets show whole. At 1280x800, screenshots into test-artifacts/. Every wait
polls its condition."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow  # a real server and browser

# The elements from ``sel`` up to <body> that scroll on their own and hold more than they show: a scroll area inside
# the scrolling page. overflow visible / clip never scrolls; an element whose content fits shows no scroll bar.
INNER_SCROLL_JS = """(sel) => {
  const out = [];
  for (let el = document.querySelector(sel); el && el !== document.body; el = el.parentElement) {
    const cs = getComputedStyle(el);
    const scrolls = !['visible', 'clip'].includes(cs.overflowY);
    if (scrolls && el.scrollHeight > el.clientHeight + 1)
      out.push({id: el.id, cls: el.className, overflowY: cs.overflowY, scroll: el.scrollHeight,
                client: el.clientHeight});
  }
  return out;
}"""


def _open_sections(page) -> None:
    """Open every closed section of the Train form: the form at its longest."""
    page.wait_for_selector("#start-btn:not([disabled])", timeout=90_000)
    for section in page.locator("#train-form [id^='sec-']").all():
        content = section.locator("> [data-testid=accordion-content]")
        if section.is_visible() and not content.is_visible():
            section.locator("> button.label-wrap").click()
            content.wait_for(state="visible")


def test_the_long_train_form_scrolls_with_the_page_not_in_a_box(page, shots, fits_width):
    """The form was a ~620 px scroll box inside the scrolling page: the wheel scrolled the box, then the page, and
    the form's end sat in a box of its own. Now neither the form nor a box around it scrolls on its own: the page
    does, the wheel over the form moves the page, and the form's last field comes into view by the page's scroll."""
    _open_sections(page)
    page.wait_for_function("document.querySelector('#train-form').getBoundingClientRect().height > 900")
    height = page.evaluate("document.querySelector('#train-form').getBoundingClientRect().height")
    assert height > page.viewport_size["height"], height  # longer than the window: the page must scroll it
    assert page.evaluate(INNER_SCROLL_JS, "#train-form") == []
    form = page.evaluate(
        "() => { const f = document.querySelector('#train-form'), cs = getComputedStyle(f);"
        " return {overflowY: cs.overflowY, maxHeight: cs.maxHeight, scroll: f.scrollHeight, client: f.clientHeight}; }"
    )
    assert form["maxHeight"] == "none" and form["scroll"] <= form["client"] + 1, form

    box = page.locator("#train-form").bounding_box()
    page.evaluate("window.scrollTo(0, 0)")
    page.mouse.move(box["x"] + box["width"] / 2, min(box["y"] + 200, 700))
    page.mouse.wheel(0, 600)
    page.wait_for_function("window.scrollY > 0")  # the wheel over the form scrolls the page
    last = page.locator("#train-form [id^='f-']").last
    last.scroll_into_view_if_needed()
    page.wait_for_function(
        "() => { const f = [...document.querySelectorAll('#train-form [id^=\"f-\"]')].pop().getBoundingClientRect();"
        " return f.bottom <= window.innerHeight && f.top >= 0; }"
    )
    assert page.evaluate(INNER_SCROLL_JS, "#train-form") == []
    page.screenshot(path=str(shots / "train-form-page-scroll.png"))
    assert fits_width(page)


# What of a block lies outside its box (the block hides its overflow): each visible descendant's edges, and the
# texts it shows.
CLIPPED_JS = """(sel) => {
  const block = document.querySelector(sel), box = block.getBoundingClientRect(), out = [];
  for (const el of block.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height || getComputedStyle(el).visibility === 'hidden') continue;
    if (r.top < box.top - 1 || r.bottom > box.bottom + 1 || r.left < box.left - 1 || r.right > box.right + 1)
      out.push({tag: el.tagName, cls: String(el.className.baseVal ?? el.className), top: r.top, bottom: r.bottom,
                box: [box.top, box.bottom], text: (el.innerText || '').slice(0, 40)});
  }
  return {out, text: block.innerText};
}"""


def test_the_lf_upload_widgets_show_whole(page, shots):
    """The LLaMA-Factory YAML section's two upload widgets were 90 px boxes around a 240 px drop area: the icon sat
    under the label and "Click to Upload" was cut in half. Each shows its label, icon and texts inside its box."""
    page.wait_for_selector("#start-btn:not([disabled])", timeout=90_000)
    page.get_by_text("LLaMA-Factory YAML", exact=True).first.click()
    for widget, label in (("#lf-upload", "Upload training YAML"), ("#lf-acc-upload", "Upload accelerate config")):
        page.locator(widget).scroll_into_view_if_needed()
        try:
            page.wait_for_function(
                f"(sel) => {{ const s = ({CLIPPED_JS})(sel); return s.out.length === 0"
                " && s.text.includes('Click to Upload'); }",
                arg=widget,
                timeout=90_000,
            )
        except Exception:  # noqa: BLE001 - the assertions below say what lies outside the box
            pass
        shown = page.evaluate(CLIPPED_JS, widget)
        assert shown["out"] == [], (widget, shown)
        for text in (label, "Drop File Here", "Click to Upload"):
            assert text in shown["text"], (widget, shown["text"])
    page.screenshot(path=str(shots / "lf-uploads.png"))


# The texts inside ``sel`` whose line runs past the box they are in (wider than ``sel`` itself).
OVERFLOW_JS = """(sel) => {
  const box = document.querySelector(sel);
  if (!box) return null;
  const right = box.getBoundingClientRect().right + 1;
  return [...box.querySelectorAll('*')].filter(el => el.childElementCount === 0 && el.textContent.trim())
    .filter(el => el.getBoundingClientRect().right > right || el.scrollWidth > el.clientWidth + 1)
    .map(el => el.textContent.slice(0, 60));
}"""


def test_an_error_naming_a_long_path_wraps_inside_its_box(page, shots):
    """A model path with no space to break at made the problem list run past its column: the text wraps in it."""
    page.wait_for_selector("#start-btn:not([disabled])", timeout=90_000)
    long_path = "/nowhere/" + "a-very-long-folder-name-without-spaces" * 4
    box = page.locator("#f-model-name-or-path input").first
    box.fill(long_path)
    box.press("Tab")
    page.wait_for_function(
        "(p) => document.querySelector('#spec-problems').innerText.includes(p.slice(0, 40))",
        arg=long_path,
        timeout=90_000,
    )
    page.locator("#spec-problems").scroll_into_view_if_needed()
    assert page.evaluate(OVERFLOW_JS, "#spec-problems") == []
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    page.locator("#train-actions").screenshot(path=str(shots / "layout-long-error.png"))
