"""Our `--tasks` run beside an lm-eval, RULER or HELMET import of the same tasks (issue 50), in a real
headless Chromium (Debian's chromium + chromium-driver): both rows in the same task columns, an
interval and a prompt length on the imported row, delta cells, and a page that fits 1400 pixels.

    OMP_NUM_THREADS=1 pytest -q -m browser tests/leaderboard/test_import_comparison_browser.py
    LEADERBOARD_SCREENSHOTS=/tmp/shots pytest ...   # keep the PNGs

Skipped, with the reason, when chromium, chromedriver or selenium is missing (failed on CI).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .browser_gate import CHROMEDRIVER, CHROMIUM, require_browser
from .import_fixtures import IMPORTED, OURS, TASKS, comparison

pytestmark = pytest.mark.browser

require_browser("selenium", "PIL")

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

WIDTH = 1400


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path_factory.mktemp('chrome-profile')}",
    ):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    yield drv
    drv.quit()


def _rows(driver, view: str) -> dict:
    return {
        r.find_element(By.CSS_SELECTOR, ".run-name").text: r
        for r in driver.find_elements(By.CSS_SELECTOR, f"#lb-{view} tbody tr")
    }


def _shared_cells(row, driver) -> list:
    """The row's cells under the task header groups (the first columns after the fixed four)."""
    heads = driver.find_elements(By.CSS_SELECTOR, "#lb-scores thead tr.cols th[data-id]")
    n = sum(1 for h in heads if h.get_attribute("data-id").startswith("(tasks side by side)/"))
    return row.find_elements(By.CSS_SELECTOR, "td.n:not(.opt)")[:n]


def _screenshot(driver, name: str):
    from PIL import Image, ImageStat

    keep = os.environ.get("LEADERBOARD_SCREENSHOTS")
    path = Path(keep) / name if keep else Path(driver.current_url.removeprefix("file://")).parent / name
    path.parent.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(path))
    img = Image.open(path).convert("L")
    stat = ImageStat.Stat(img)
    assert stat.stddev[0] > 20, f"{name} looks blank (pixel std {stat.stddev[0]:.1f})"
    assert sum(img.histogram()[:100]) / (img.width * img.height) > 0.005, f"{name} has almost no text pixels"
    return img


@pytest.mark.parametrize("kind", ["lm-eval", "ruler", "helmet"])
def test_comparison_page_in_chromium(driver, tmp_path, kind):
    site, _ = comparison(tmp_path, kind)
    driver.set_window_size(WIDTH, 1000)
    driver.get((site / "index.html").as_uri())
    assert [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")] == []
    groups = [g.text for g in driver.find_elements(By.CSS_SELECTOR, "#lb-scores thead tr.groups th.g")]
    assert groups[:3] == TASKS and groups[3].startswith("RULER") and "3 of 13 tasks" in groups[3]
    rows = _rows(driver, "scores")
    ours, imp = _shared_cells(rows[OURS], driver), _shared_cells(rows[IMPORTED[kind]], driver)
    assert len(ours) == len(imp) == 6  # 3 tasks x 1K, 2K: both rows in the same task columns
    for cell in ours + imp:
        assert cell.find_element(By.CSS_SELECTOR, ".pm").text.startswith("±")  # an interval on both rows
        assert cell.find_element(By.CSS_SELECTOR, ".plen").text.endswith(" tok")  # the real prompt length
        assert "%" not in cell.text and cell.get_attribute("data-v") != ""
    assert "standard error" not in imp[0].get_attribute("title")  # per-sample scores: our bootstrap
    # The page fits 1400 pixels; the wide table scrolls inside its own box, its last column reachable.
    assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth + 1")
    wrap = driver.find_element(By.CSS_SELECTOR, ".table-wrap[data-view=scores]")
    driver.execute_script("arguments[0].scrollLeft = arguments[0].scrollWidth", wrap)
    last = driver.find_elements(By.CSS_SELECTOR, "#lb-scores thead tr.cols th")[-1]
    right = driver.execute_script("return arguments[0].getBoundingClientRect().right", last)
    assert right <= driver.execute_script("return arguments[0].getBoundingClientRect().right", wrap) + 1
    driver.execute_script("arguments[0].scrollLeft = 0", wrap)
    img = _screenshot(driver, f"import-{kind}-scores-{WIDTH}.png")
    assert abs(img.width - WIDTH) <= 20
    # The delta view: the imported row minus ours, task by task, each with its interval.
    driver.find_element(By.CSS_SELECTOR, 'button.view[data-view="delta"]').click()
    delta = _rows(driver, "delta")
    cells = delta[IMPORTED[kind]].find_elements(By.CSS_SELECTOR, "td.n:not(.opt)")[:6]
    for cell in cells:
        assert cell.text[:1] in "+−0" and cell.find_element(By.CSS_SELECTOR, ".pm").text.startswith("±")
        assert "95% interval" in cell.get_attribute("title")
    assert all(c.text == "base" for c in delta[OURS].find_elements(By.CSS_SELECTOR, "td.n:not(.opt)")[:6])
    _screenshot(driver, f"import-{kind}-delta-{WIDTH}.png")
    # Provenance: the imported row's own harness, backend and dtype, never ours.
    prov = {
        tr.find_element(By.CSS_SELECTOR, "th").text: [td.text for td in tr.find_elements(By.CSS_SELECTOR, "td")]
        for tr in driver.find_elements(By.CSS_SELECTOR, "table.prov-table tbody tr")
    }
    assert prov["harness"][0].startswith("longctx-harness") and not prov["harness"][1].startswith("longctx")
    # what the file says (RULER's summary.csv and predictions say nothing of backend or dtype: "—")
    said = ("—", "—") if kind == "ruler" else ("float32", "hf")
    assert (prov["dtype"][1], prov["backend"][1]) == said and prov["package_version"][1] == "—"
