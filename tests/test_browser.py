"""The report renders in a real headless Chromium without console errors or broken images."""

from __future__ import annotations

import os
import shutil

import pytest

from .conftest import figure_files

pytestmark = [pytest.mark.integration, pytest.mark.browser]

CHROMIUM = os.environ.get("ICMLREPRO_CHROMIUM", "/usr/bin/chromium")


def test_report_in_headless_chromium(smoke_run, tmp_path):
    if not shutil.which(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail(f"Chromium not found at {CHROMIUM}; the test set-up installs Debian's chromium")
        pytest.skip(f"Chromium not installed at {CHROMIUM}")
    from playwright.sync_api import sync_playwright

    page_errors, console_errors, failed = [], [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: m.type == "error" and console_errors.append(m.text))
        page.on("pageerror", lambda e: page_errors.append(str(e)))
        page.on("requestfailed", lambda r: failed.append(r.url))
        page.goto((smoke_run / "report" / "report-smoke.html").as_uri())
        page.wait_for_load_state("load")
        # the first screen is the papers x verdicts grid, whole, with the legend folded away
        grid = page.evaluate("""(() => { const g = document.getElementById('verdict-grid');
            return {bottom: g.getBoundingClientRect().bottom, rows: g.querySelectorAll('tbody tr').length}; })()""")
        assert grid["bottom"] <= 900 and grid["rows"] == 19, grid
        assert page.evaluate("!document.querySelector('details.legend').open")
        closed_height = page.evaluate("document.documentElement.scrollHeight")
        # every paper's section is closed at first; a grid row opens its section
        assert page.evaluate("Array.from(document.querySelectorAll('details.paper')).every(d => !d.open)")
        page.click("#verdict-grid tr[data-paper='lec'] td.decided-share")
        assert page.evaluate("document.getElementById('paper-lec').open")
        # the verdict filter hides the claims of an unticked verdict, in the matrix and in the tables
        verdict = page.evaluate("document.querySelector('tr.claim-row').dataset.verdict")
        page.uncheck(f"#verdict-filter input[value='{verdict}']")
        hidden = page.evaluate(f"""Array.from(document.querySelectorAll('[data-verdict="{verdict}"]'))
            .every(el => getComputedStyle(el).display === 'none')""")
        page.check(f"#verdict-filter input[value='{verdict}']")
        assert hidden
        # open everything; lazily decoded figures must all decode
        page.click("#expand-all")
        lazy = page.evaluate("Array.from(document.images).every(i => i.loading === 'lazy' && i.decoding === 'async')")
        # a lazy image far off screen never starts loading; make every one eager, then wait for all
        broken = page.evaluate("""async () => {
            const imgs = Array.from(document.images);
            imgs.forEach(i => { i.loading = 'eager'; });
            const timeout = new Promise(r => setTimeout(r, 30000));
            await Promise.race([Promise.all(imgs.map(i => i.decode().catch(() => null))), timeout]);
            return imgs.filter(i => !(i.complete && i.naturalWidth > 0)).length; }""")
        n_images = page.evaluate("document.images.length")
        # claim ids wrap only after "_" or ".", never inside a word ("ris k_co ntro l")
        page.set_viewport_size({"width": 700, "height": 900})
        mid_word = page.evaluate(MID_WORD_BREAKS)
        shot = tmp_path / "report.png"
        page.screenshot(path=str(shot), full_page=True)
        browser.close()
    assert n_images == sum(len(f) for f in figure_files(smoke_run).values()) and broken == 0 and lazy
    assert not console_errors and not page_errors and not failed, (console_errors, page_errors, failed)
    assert shot.stat().st_size > 10_000
    assert closed_height < 5 * 900, closed_height
    assert not mid_word, mid_word


# The claim ids (in the claims tables) whose rendered text moves to a new line after a character other than "_" or
# ".": each character's box from a DOM Range, a new line where its top drops below the previous character's.
MID_WORD_BREAKS = """() => { const bad = [];
  document.querySelectorAll('td.claim-id code').forEach(code => {
    const walk = document.createTreeWalker(code, NodeFilter.SHOW_TEXT); let prev = null, node;
    while ((node = walk.nextNode())) {
      for (let i = 0; i < node.length; i++) {
        const r = document.createRange(); r.setStart(node, i); r.setEnd(node, i + 1);
        const box = r.getClientRects()[0]; if (!box) continue;
        if (prev && box.top > prev.top + 2 && !'_.'.includes(prev.ch)) bad.push(code.textContent);
        prev = {top: box.top, ch: node.data[i]};
      }
    }
  });
  return bad; }"""
