"""The leaderboard's effective-length-vs-training-tokens chart in a real headless Chromium: one point
and one interval bar per checkpoint, left to right by tokens, on the rung of its effective length.

    OMP_NUM_THREADS=1 pytest -q -m browser tests/leaderboard/test_training_curve_browser.py
"""

from __future__ import annotations

import json

import pytest

from harness.cli import main

from .browser_gate import CHROMEDRIVER, CHROMIUM, require_browser
from .training_curve_fixtures import STEPS, TOKENS_PER_STEP, training_results

pytestmark = pytest.mark.browser

require_browser("selenium")

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    root = tmp_path_factory.mktemp("curve")
    (root / "anchor").mkdir()
    (root / "anchor" / "results.json").write_text(json.dumps(training_results()))
    assert main(["leaderboard", str(root / "anchor"), "--out", str(root / "site")]) == 0
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
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    drv.set_window_size(1280, 900)
    drv.get((root / "site" / "index.html").as_uri())
    yield drv
    drv.quit()


def test_one_point_and_bar_per_checkpoint_by_tokens(page):
    charts = page.find_elements(By.CSS_SELECTOR, 'svg[data-chart="eff-by-tokens"]')
    assert len(charts) == 1
    chart = charts[0]
    assert chart.is_displayed() and chart.size["width"] > 200
    heading = [h.text for h in page.find_elements(By.TAG_NAME, "h2") if "training tokens" in h.text]
    assert heading and heading[0].endswith("effective length vs training tokens")
    dots = chart.find_elements(By.CSS_SELECTOR, "g.series circle")
    bars = chart.find_elements(By.CSS_SELECTOR, "line.interval")
    assert len(dots) == len(bars) == len(STEPS)
    xs = [d.rect["x"] for d in dots]
    assert xs == sorted(xs) and len(set(xs)) == len(xs)  # left to right by tokens
    shown = ["410K", "819K", "1.23M", "1.64M", "2.05M"]  # step x TOKENS_PER_STEP, 3 digits
    assert [s * TOKENS_PER_STEP for s in STEPS] == [409600, 819200, 1228800, 1638400, 2048000]
    for dot, bar, step, tokens in zip(dots, bars, STEPS, shown):
        tip = dot.find_element(By.TAG_NAME, "title").get_attribute("textContent")
        assert f"{tokens} tokens (step {step})" in tip
        centre = dot.rect["y"] + dot.rect["height"] / 2
        assert bar.rect["y"] - 1 <= centre <= bar.rect["y"] + bar.rect["height"] + 1  # the point lies on its bar
    tall = [b.rect["height"] for b in bars]
    assert max(tall) > 2 * min(tall)  # an interval spanning two lengths stands out from a settled one
    ticks = [t.text for t in chart.find_elements(By.CSS_SELECTOR, "text.tick")]
    assert "< 1K" in ticks and "4K" in ticks
