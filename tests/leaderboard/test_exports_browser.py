"""The page of a non-RULER selection in headless Chromium: its charts are drawn and visible.

Shares the driver and the skip rules (and CI=true failure) of test_leaderboard_browser.py."""

from __future__ import annotations

import pytest

from harness.cli import main

from .export_fixtures import helmet_dirs  # noqa: F401
from .test_leaderboard_browser import _open, downloads, driver  # noqa: F401

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def helmet_site(tmp_path_factory, helmet_dirs):  # noqa: F811
    out = tmp_path_factory.mktemp("helmet-site")
    assert main(["leaderboard", *map(str, helmet_dirs.values()), "--out", str(out)]) == 0
    return out


def test_charts_of_a_custom_selection_render(driver, helmet_site):  # noqa: F811
    from selenium.webdriver.common.by import By

    _open(driver, helmet_site)
    assert [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")] == []
    charts = {
        kind: [e for e in driver.find_elements(By.CSS_SELECTOR, f'svg[data-chart="{kind}"]') if e.is_displayed()]
        for kind in ("by-length", "by-step", "eff-by-step")
    }
    assert [len(charts[k]) for k in ("by-length", "by-step", "eff-by-step")] == [1, 2, 2]
    for svg in charts["by-length"] + charts["by-step"]:
        assert svg.size["width"] > 300 and svg.size["height"] > 150
    length = charts["by-length"][0]
    assert len(length.find_elements(By.CSS_SELECTOR, "polygon.band")) == 2
    assert len(length.find_elements(By.CSS_SELECTOR, "g.series circle")) == 2 * 4
    heads = [h.text for h in driver.find_elements(By.CSS_SELECTOR, "section.charts h2")]
    assert heads[0].endswith("score vs context length") and "json_kv" in heads[0]
    assert all(len(s.find_elements(By.CSS_SELECTOR, "rect.window")) == 1 for s in charts["by-step"])
