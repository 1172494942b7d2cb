"""A loadwatch page as a person opens it: from disk, in headless Chromium, with the network off."""

from __future__ import annotations

import shutil
from pathlib import Path

CHROMIUM = shutil.which("chromium")


def open_offline(path: Path, screenshot: Path | None = None) -> dict:
    """What Chromium drew: the titles of the Bokeh charts (none on a page without charts), the
    points of the per-request scatter, whether every image loaded, the links, and any page error."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_context(offline=True, viewport={"width": 1200, "height": 900}).new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(path.as_uri())
        page.wait_for_load_state("load")
        if page.evaluate("() => 'Bokeh' in window"):
            page.wait_for_function("() => Object.keys(Bokeh.index).length > 0", timeout=30_000)
        drawn = page.evaluate("""() => {
            const doc = window.Bokeh ? Bokeh.documents[0] : null;
            const models = doc ? [...doc.all_models] : [];
            const scatter = doc ? doc.get_model_by_name("request") : null;
            return {
                titles: models.filter((m) => m.type === "Title").map((m) => m.text),
                points: scatter ? scatter.data_source.data.id.length : 0,
                images: [...document.images].map((i) => i.complete && i.naturalWidth > 0),
                links: [...document.links].map((a) => a.getAttribute("href")),
            };
        }""")
        # Bokeh draws in shadow roots, which Playwright's text locators enter.
        drawn["text"] = lambda text: page.get_by_text(text).first.is_visible()
        drawn["seen"] = {t: drawn["text"](t) for t in ("Settings", "The engine's side is missing")}
        if screenshot is not None:
            page.screenshot(path=str(screenshot), full_page=True)
        browser.close()
    drawn["errors"] = errors
    del drawn["text"]
    return drawn
