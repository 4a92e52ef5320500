"""Export tab, GGUF (issue 24, item 6): a person picks the demo model, chooses Q8_0, clicks Export and sees the
progress, then the GGUF file with its size, the verification lines (max logit difference within its tolerance, in
transformers and in llama.cpp, and the greedy text compared) and the `ollama create` command; the file the page names
exists with that size."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path


def test_gguf_q8_0_export_from_the_export_tab(page, server, shots):
    model = server.home / "models" / "demo-tiny-llama"
    for _ in range(600):  # the studio builds the demo model on its first start
        if (model / "model.safetensors").is_file() and (model / "studio_demo.json").is_file():
            break
        page.wait_for_timeout(200)
    page.get_by_role("tab", name="Export").click()
    page.wait_for_selector("#xf-export", timeout=90_000)
    page.fill("#export-source input", str(model))
    page.keyboard.press("Enter")
    page.click("#xf-format input")
    page.get_by_role("option", name="gguf-q8_0").first.click()
    page.click("#xf-export")
    page.wait_for_selector("#gguf-path", timeout=400_000)
    page.screenshot(path=str(shots / "export-gguf.png"))
    shown = page.inner_text("#xf-result")
    out = Path(page.inner_text("#gguf-path"))
    gguf = next(out.glob("*.gguf"))
    assert gguf.name in shown
    size = gguf.stat().st_size
    assert f"{size / 1e6:.1f} MB" in shown  # the size a person reads is the file's (a GGUF of the demo: ~1.1 MB)
    report = json.loads((out / "verify.json").read_text())
    m = re.search(r"max \|logit diff\| (\S+) <= (\S+) \(gguf-q8_0", shown)
    assert m and float(m.group(1)) == float(f"{report['max_abs_diff']:.3g}") and report["passed"]
    assert f"greedy text same on {report['greedy_same']}/3 prompts" in shown
    # and read by llama.cpp itself: its logit difference and greedy text, as verify.json records them
    cpp = report["llama_cpp"]
    assert cpp and cpp["passed"] and cpp["greedy_same"] == 3, cpp
    assert f"llama.cpp: max |logit diff| {cpp['max_abs_diff']:.3g}; greedy text same on 3/3 prompts" in shown
    assert "ollama create" in shown and (out / "Modelfile").is_file()
    # the Modelfile as it was written, and every exported file to take home through the page (issue 45 item 14)
    modelfile = page.locator("#xf-modelfile")
    modelfile.wait_for(state="visible", timeout=30_000)
    written = (out / "Modelfile").read_text(encoding="utf-8")
    first = written.splitlines()[0]
    assert first.startswith("FROM ") and first in modelfile.inner_text()
    links = page.locator("#xf-files a[href]")
    links.first.wait_for(timeout=30_000)
    offered = {link.get_attribute("href").rsplit("/", 1)[-1]: link.get_attribute("href") for link in links.all()}
    names = {f.name for f in out.iterdir() if f.is_file() and f.name in shown and not f.name.startswith(".")}
    assert gguf.name in offered and "Modelfile" in offered and names <= set(offered), (offered, names)
    got = page.request.get(offered[gguf.name])  # the page's own session: the login cookie, nothing else
    assert got.ok and hashlib.sha256(got.body()).hexdigest() == hashlib.sha256(gguf.read_bytes()).hexdigest()
