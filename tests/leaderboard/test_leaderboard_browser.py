"""The leaderboard page in a real headless Chromium (Debian's chromium + chromium-driver).

    OMP_NUM_THREADS=1 pytest -q -m browser tests/leaderboard
    LEADERBOARD_SCREENSHOTS=/tmp/shots pytest -q -m browser tests/leaderboard   # keep the PNGs

Skipped, with the reason, when chromium, chromedriver or selenium is missing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from .browser_gate import CHROMEDRIVER, CHROMIUM, require_browser
from .conftest import XSS

pytestmark = pytest.mark.browser

require_browser("selenium", "PIL")

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By


@pytest.fixture(scope="module")
def downloads(tmp_path_factory):
    return tmp_path_factory.mktemp("downloads")


@pytest.fixture(scope="module")
def driver(tmp_path_factory, downloads):
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    # No network on CI machines: nothing may try to reach the outside (updates, sync, QUIC probes).
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={tmp_path_factory.mktemp('chrome-profile')}",
    ):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    drv.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    yield drv
    drv.quit()


def _open(driver, site, width=1280, height=900):
    driver.set_window_size(width, height)
    driver.get((site / "index.html").as_uri())
    driver.get_log("browser")  # start each test with an empty console log... after reading the load's messages
    return driver


def _visible_runs(driver, view="scores"):
    rows = driver.find_elements(By.CSS_SELECTOR, f"#lb-{view} tbody tr")
    return [r.find_element(By.CSS_SELECTOR, ".run-name").text for r in rows if r.is_displayed()]


def _col_index(driver, label, group_nth=0):
    heads = driver.find_elements(By.CSS_SELECTOR, "#lb-scores thead tr.cols th")
    return [h for h in heads if h.text.strip(" ▲▼") == label][group_nth]


def test_loads_from_file_url_without_console_errors(driver, site):
    driver.set_window_size(1280, 900)
    driver.get((site / "index.html").as_uri())
    logs = driver.get_log("browser")
    assert [e for e in logs if e["level"] in ("SEVERE", "WARNING")] == []
    assert driver.find_element(By.ID, "lb-title").text == "Fixture leaderboard"
    # Self-contained: the page fetched no resource at all.
    assert driver.execute_script("return performance.getEntriesByType('resource').length") == 0
    assert len(_visible_runs(driver)) == 5


def test_script_run_name_is_text_and_never_runs(driver, site):
    _open(driver, site)
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018  alert(1) or alert(2) would be open here
    assert XSS in _visible_runs(driver)
    mode_cells = [
        td.get_attribute("textContent") for td in driver.find_elements(By.CSS_SELECTOR, "#lb-scores tbody td.t")
    ]
    assert '"><img src=x onerror=alert(2)>' in mode_cells
    assert driver.execute_script("return document.querySelectorAll('img').length") == 0
    assert driver.execute_script("return document.scripts.length") == 2


def test_clicking_a_header_resorts_rows(driver, site, board):
    _open(driver, site)
    cid = next(c["id"] for c in board["columns"] if c["suite"] == "ruler" and c["key"] == "len:131072")
    values = {r["run"]: r["cells"][cid]["value"] for r in board["rows"]}
    present = sorted((v, n) for n, v in values.items() if v is not None)
    missing = [n for n in values if values[n] is None]
    th = _col_index(driver, "128K")
    th.click()
    assert th.get_attribute("aria-sort") == "descending"
    assert _visible_runs(driver) == [n for _, n in reversed(present)] + missing  # missing last, never as 0
    th.click()
    assert th.get_attribute("aria-sort") == "ascending"
    assert _visible_runs(driver) == [n for _, n in present] + missing
    _col_index(driver, "Run").click()
    assert _visible_runs(driver) == sorted(values, key=str.lower)


def test_filter_hides_rows(driver, site):
    _open(driver, site)
    box = driver.find_element(By.ID, "lb-filter")
    box.send_keys("anchor")
    assert _visible_runs(driver) == ["anchor", "anchor-11of13"]
    assert driver.find_element(By.ID, "lb-count").text == "2 of 5 runs"
    box.send_keys(" 11of")
    assert _visible_runs(driver) == ["anchor-11of13"]
    box.clear()
    box.send_keys("intra-doc")  # matches the mode column too
    assert _visible_runs(driver) == ["intra-doc-short"]
    # A tap on a missing cell tells why (touch screens have no hover).
    missing = next(
        td for td in driver.find_elements(By.CSS_SELECTOR, "#lb-scores tbody tr td.miss") if td.is_displayed()
    )
    missing.click()
    tip = driver.find_element(By.ID, "lb-tip")
    assert tip.is_displayed() and tip.text.startswith("not evaluated at 64K")


def test_downloads_are_what_the_page_shows(driver, site, downloads):
    _open(driver, site)
    assert driver.execute_script("return window.leaderboard.csv()") == (site / "leaderboard.csv").read_text(
        encoding="utf-8"
    )
    driver.find_element(By.ID, "lb-csv").click()
    target = downloads / "leaderboard.csv"
    for _ in range(100):
        if target.exists() and target.stat().st_size:
            break
        time.sleep(0.05)
    assert target.read_text(encoding="utf-8") == (site / "leaderboard.csv").read_text(encoding="utf-8")
    # Filtered and re-sorted: the export follows the page.
    driver.find_element(By.ID, "lb-filter").send_keys("anchor")
    _col_index(driver, "Avg").click()
    rows = driver.execute_script("return window.leaderboard.json().rows.map(function (r) { return r.run; })")
    assert rows == _visible_runs(driver) and len(rows) == 2
    csv_lines = driver.execute_script("return window.leaderboard.csv()").splitlines()
    assert [line.split(",")[0] for line in csv_lines[1:]] == rows
    # The delta view exports the delta table.
    driver.find_element(By.CSS_SELECTOR, 'button.view[data-view="delta"]').click()
    assert (
        driver.find_element(By.ID, "lb-delta").is_displayed()
        and not driver.find_element(By.ID, "lb-scores").is_displayed()
    )
    driver.find_element(By.ID, "lb-filter").clear()
    driver.execute_script("document.getElementById('lb-filter').dispatchEvent(new Event('input'))")
    assert driver.execute_script("return window.leaderboard.csv()") == (site / "leaderboard-delta.csv").read_text(
        encoding="utf-8"
    )
    driver.find_element(By.ID, "lb-md-toggle").click()
    pre = driver.find_element(By.CSS_SELECTOR, 'pre.md-text[data-view="delta"]')
    assert pre.is_displayed() and pre.text.startswith("| Run | Mode |")
    assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []


def _screenshot(driver, site, width, name):
    from PIL import Image, ImageStat

    _open(driver, site, width)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, min(height + 120, 4000))
    keep = os.environ.get("LEADERBOARD_SCREENSHOTS")
    path = Path(keep) / name if keep else site.parent / name
    path.parent.mkdir(parents=True, exist_ok=True)
    assert driver.save_screenshot(str(path))
    img = Image.open(path).convert("L")
    # Non-blank: real contrast (text, colour scale, charts), not a white page with a stray pixel.
    stat = ImageStat.Stat(img)
    assert stat.stddev[0] > 20, f"{name} looks blank (pixel std {stat.stddev[0]:.1f})"
    dark = sum(img.histogram()[:100]) / (img.width * img.height)
    assert dark > 0.005, f"{name} has almost no dark (text) pixels"
    return img


@pytest.mark.parametrize("width", [1280, 390])
def test_screenshot_is_not_blank(driver, site, width):
    img = _screenshot(driver, site, width, f"leaderboard-{width}.png")
    assert abs(img.width - width) <= 20
    # The page itself never scrolls sideways; wide tables scroll inside their own box.
    assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth + 1")
    # The scores are on screen at phone width (the model path columns give way).
    first_score = driver.find_element(By.CSS_SELECTOR, "#lb-scores tbody tr td.n.first")
    assert first_score.location["x"] + first_score.size["width"] <= width


def test_intervals_significance_and_heatmaps_render(driver, paired_site):
    _open(driver, paired_site)
    assert [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")] == []
    # Scores view: every score cell shows the half-width of its interval; the legend explains it.
    pms = [e for e in driver.find_elements(By.CSS_SELECTOR, "#lb-scores tbody td .pm") if e.is_displayed()]
    assert pms and all(e.text.startswith("±") for e in pms)
    legend = driver.find_element(By.CSS_SELECTOR, "p.legend")
    assert "half-width of the 95% interval" in legend.text
    # Delta view: the shifted run is marked significant, the identical one is not, the legend says what * means.
    driver.find_element(By.CSS_SELECTOR, 'button.view[data-view="delta"]').click()
    rows = {
        r.find_element(By.CSS_SELECTOR, ".run-name").text: r
        for r in driver.find_elements(By.CSS_SELECTOR, "#lb-delta tbody tr")
    }
    sig = lambda name: [e for e in rows[name].find_elements(By.CSS_SELECTOR, ".sig") if e.is_displayed()]
    assert len(sig("anchor")) >= 3 and sig("same") == []
    cell = sig("anchor")[0].find_element(By.XPATH, "..")
    assert "significant at 95%" in cell.get_attribute("title") and "paired bootstrap" in cell.get_attribute("title")
    assert "significant at 95%: the interval excludes 0" in legend.text
    # Heatmaps: three runs and two deltas, drawn inline, each value readable on hover (<title>).
    maps = driver.find_elements(By.CSS_SELECTOR, "section.heatmaps svg.heatmap")
    assert len(maps) == 5 and all(m.is_displayed() and m.size["width"] > 100 for m in maps)
    assert {m.get_attribute("data-kind") for m in maps} == {"scores", "delta"}
    tip = maps[0].find_element(By.CSS_SELECTOR, "g.cell rect title").get_attribute("textContent")
    assert "depth" in tip and "needle" in tip
    # Readable at a normal window width (issue 25 §5): every map at its natural size, not shrunk to
    # fit a grid column, with cell numbers at least 12 px high and rows at least 24 px.
    box = "const r = arguments[0].getBoundingClientRect(); return [r.width, r.height];"
    for m in maps:
        assert m.size["width"] >= float(m.get_attribute("width")) - 1
        _, text_h = driver.execute_script(box, m.find_element(By.CSS_SELECTOR, "g.cell text"))
        _, cell_h = driver.execute_script(box, m.find_element(By.CSS_SELECTOR, "g.cell rect"))
        assert text_h >= 12 and cell_h >= 24, (text_h, cell_h)
    assert driver.execute_script("return performance.getEntriesByType('resource').length") == 0
    img = _screenshot(driver, paired_site, 1280, "leaderboard-paired-1280.png")
    assert img.width > 1000
