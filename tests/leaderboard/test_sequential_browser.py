"""The page of runs evaluated sequentially, in headless Chromium: the verdict, interval and n of every
cell are in the rendered DOM, visible, coloured by verdict in the screenshot, and a run name that is
markup stays text.

Shares the driver and the skip rules (and CI=true failure) of test_leaderboard_browser.py."""

from __future__ import annotations

import io

import pytest

from .conftest import XSS
from .sequential_fixtures import LENGTHS, MISSING_CELL, paired_block, sequential_dirs, sequential_site  # noqa: F401
from .test_leaderboard_browser import _open, downloads, driver  # noqa: F401  (skips here without a browser)

pytestmark = pytest.mark.browser

# sequential.css.j2's background per verdict
COLOURS = {"better": (0xD9, 0xF0, 0xD3), "worse": (0xFD, 0xDB, 0xC7), "equivalent": (0xDE, 0xEB, 0xF7)}


def _section(drv, run):
    from selenium.webdriver.common.by import By

    found = [
        s for s in drv.find_elements(By.CSS_SELECTOR, "#lb-sequential .seq-run") if s.get_attribute("data-run") == run
    ]
    assert len(found) == 1, run
    return found[0]


def test_verdicts_intervals_and_n_in_the_dom(driver, sequential_site):  # noqa: F811
    from selenium.webdriver.common.by import By

    _open(driver, sequential_site)
    assert [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")] == []
    sec = _section(driver, "seq-anchor")
    assert sec.find_element(By.CSS_SELECTOR, "h3").text == "seq-anchor minus full"
    rule = sec.find_element(By.CSS_SELECTOR, ".seq-rule")
    assert "samples 4321 of the fixed protocol's 19500 (0.22x)" in rule.text
    assert "alpha 0.05 family-wise over 41 cells" in rule.text and "±5 points" in rule.text
    rows = sec.find_elements(By.CSS_SELECTOR, "table.seq-table tbody tr")
    grid = {r.find_element(By.CSS_SELECTOR, "th").text: r.find_elements(By.CSS_SELECTOR, "td") for r in rows}
    block = paired_block()
    checked = 0
    for task, by_len in block["cells"].items():
        for L, e in by_len.items():
            td = grid["Average (RULER)" if task == "average" else task][LENGTHS.index(int(L))]
            assert td.is_displayed() and td.size["height"] > 10
            status = "open" if e["stopped"] == "open" else e["verdict"]
            assert td.get_attribute("data-status") == status
            word = {"equivalent": "equiv"}.get(status, status)
            lo, hi = e["interval"]
            assert td.text.startswith(word + " ")
            assert f"[{lo:+.1f}, {hi:+.1f}]".replace("+0.0", "0.0") in td.text and td.text.endswith(f"n={e['n']}/500")
            assert f"stopped: {e['stopped']}" in td.get_attribute("title")
            checked += 1
    assert checked == 41
    missing = grid[MISSING_CELL[0]][LENGTHS.index(MISSING_CELL[1])]
    assert missing.text == "—" and "v-none" in missing.get_attribute("class")
    width = _section(driver, "seq-width")
    assert "within 96.0 [91.5, 99.5] n=60/500" in width.text and "narrower than 10 points" in width.text


def test_a_tap_shows_the_cells_record(driver, sequential_site):  # noqa: F811
    from selenium.webdriver.common.by import By

    _open(driver, sequential_site)
    td = _section(driver, "seq-anchor").find_element(By.CSS_SELECTOR, "td.v-better")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", td)
    td.click()
    tip = driver.find_element(By.ID, "lb-tip")
    assert (
        tip.is_displayed()
        and "this run is better" in tip.text
        and "75 samples drawn of the fixed protocol's 500" in tip.text
    )


def test_verdict_colours_in_the_screenshot(driver, sequential_site):  # noqa: F811
    from PIL import Image
    from selenium.webdriver.common.by import By

    _open(driver, sequential_site, 1280, 900)
    table = _section(driver, "seq-anchor").find_element(By.CSS_SELECTOR, "table.seq-table")
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", table)
    img = Image.open(io.BytesIO(driver.get_screenshot_as_png())).convert("RGB")
    scale = driver.execute_script("return window.devicePixelRatio") or 1
    box = "const r = arguments[0].getBoundingClientRect(); return [r.left, r.top, r.width, r.height];"
    seen = set()
    for td in table.find_elements(By.CSS_SELECTOR, "td.seq"):
        status = td.get_attribute("data-status")
        if status not in COLOURS:
            continue
        left, top, _, h = driver.execute_script(box, td)
        if top < 0 or top + h > 900:
            continue
        # The padding's top-left corner: background, not text.
        pixel = img.getpixel((int((left + 3) * scale), int((top + 2) * scale)))
        assert all(abs(a - b) <= 6 for a, b in zip(pixel, COLOURS[status])), (status, pixel)
        seen.add(status)
    assert seen == set(COLOURS)


def test_markup_run_name_stays_text(driver, sequential_site):  # noqa: F811
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    _open(driver, sequential_site)
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018
    sec = _section(driver, XSS)
    assert sec.find_element(By.CSS_SELECTOR, "h3 .run-name").text == XSS
    assert f"minus {XSS}" in sec.find_element(By.CSS_SELECTOR, "h3").text
    assert driver.execute_script("return document.scripts.length") == 2


def test_phone_width_scrolls_inside_the_tables(driver, sequential_site):  # noqa: F811
    from selenium.webdriver.common.by import By

    _open(driver, sequential_site, 390, 800)
    assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth + 1")
    first = _section(driver, "seq-anchor").find_element(By.CSS_SELECTOR, "td.seq")
    assert first.is_displayed() and first.text.startswith("better")
