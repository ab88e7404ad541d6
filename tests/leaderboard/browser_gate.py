"""The one gate of the browser tests: Debian's chromium and chromium-driver and the Python packages a
test module needs, or a skip with the reason (a failure under CI=true, which must not go green with the
browser checks missing). Call it at a test module's top, before importing selenium."""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
_INSTALL = {"selenium": "selenium", "PIL": "pillow"}


def skip_reason(modules: tuple[str, ...]) -> str | None:
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        return "Debian chromium/chromium-driver not installed (apt-get install -y chromium chromium-driver)"
    for name in modules:
        if importlib.util.find_spec(name) is None:
            return f"browser tests need {name} (pip install {' '.join(_INSTALL[m] for m in modules)})"
    return None


def require_browser(*modules: str) -> None:
    """Skip the calling module (fail it under CI=true) unless the browser and `modules` are there."""
    reason = skip_reason(modules)
    if reason:
        if os.environ.get("CI") == "true":  # CI must not go green with the browser checks missing
            pytest.fail(f"CI=true and the browser tests cannot run: {reason}", pytrace=False)
        pytest.skip(reason, allow_module_level=True)
