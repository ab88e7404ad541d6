"""Checkpoint folders for `harness eval --ckpts SPEC [--last N]` (the folder kind of model source,
harness/models/sources/checkpoint.py; GGUF files and served models are other kinds, and
`harness.models.sources.select_checkpoints` resolves every kind: the sources build on this module, which
imports none of them).

    from harness.models.checkpoints import check_same_tokenizer, run_name_default
    from harness.models.sources import select_checkpoints
    ckpts = select_checkpoints("runs/anchor/ckpt-<1950..2000>")   # existing dirs, sorted by step
    ckpts = select_checkpoints("runs/anchor/ckpt-*", last=5)      # the last five by step
    ckpts = select_checkpoints("runs/a/ckpt-100,runs/b/ckpt-100,meta-llama/Llama-2-7b-hf@main")

SPEC is a comma list of items; each item is
  - a path with one `<A..B>` range: existing directories whose number there lies in [A, B];
  - a glob (`*`, `?`, `[...]`): the matching directories;
  - a local directory;
  - a hub model name `org/name[@revision]` or `hub:name[@revision]` (not checked here: the hub
    may be unreachable; the runner reports a missing model).
Local checkpoints must be loadable models (config.json plus weights); the step is the trailing
integer of the directory name after a checkpoint word, or a name of digits alone (`ckpt-2000` ->
2000, `checkpoint-500`, `global_step500`, `iter_0000500`, `step-500`, `500` -> 500; `gpt2`,
`Llama-2-7b-hf`, `Mistral-7B-v0.1`, `Writer-2` -> None). The result is sorted by step (step-less
ones first, by path), then `last` keeps the last N; a `last` that would choose among step-less
ones (by path, not by training) is refused. Incomplete training
checkpoints (`incomplete_reason`: a run stopped while writing them) are skipped with a one-line
warning on stderr before `last` is applied.

Fingerprint (local): sha256 over config.json's bytes and, for each weight file in name order,
its name, size and the sha256 of its first and last 1 MiB (all of it when smaller than 2 MiB).
Reading the whole of a multi-GB checkpoint would cost minutes per evaluation, while re-training
rewrites every tensor, so the head and tail of each file (the safetensors header and the first
and last tensors) change with it. Modification times are left out so a copied checkpoint keeps
its fingerprint.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import UserError

_RANGE = re.compile(r"<\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*>", re.ASCII)
# The step is a trailing integer after a checkpoint word (ckpt-2000, checkpoint_500, global_step2000,
# step143000, iter_0001000) or a whole name of digits; not the digits a model's name ends in, such as
# gpt2, Mistral-7B-v0.1 or SmolLM2-135M-Instruct.Q4_1 (which would make a base model "step 1" of a run
# named after its parent folder).
# The word starts the name or follows a non-letter: Writer-2 and Jupiter-1 are names, not iter 2.
_TRAILING_INT = re.compile(
    r"(?:^|(?<![a-z])(?:ckpt|checkpoints?|steps?|iter(?:ation)?)[-_.]?)(\d+)$", re.IGNORECASE | re.ASCII
)
_HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*(@[\w./-]+)?$")
_GLOB_CHARS = set("*?[")
_CHUNK = 1 << 20

WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin")
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "tokenizer.model",
    "spiece.model",
)
TRAINING_FILE = "harness_training.json"
# Completeness of checkpoints written by `harness train` (training/checkpointing.py): the in-progress
# marker is written first and removed last; the completion marker (the files the checkpoint holds)
# is written after every other file. See docs/contracts.md.
IN_PROGRESS_FILE = "harness_incomplete"
COMPLETE_FILE = "harness_complete.json"
# A fast tokenizer's save_pretrained writes both; a checkpoint holding one without the other lost
# files while being deleted (earlier versions replaced a checkpoint by deleting it first).
_TOKENIZER_PAIR = ("tokenizer.json", "tokenizer_config.json")


@dataclass(frozen=True)
class Checkpoint:
    """One model as records name it (built by a model source, harness/models/sources/)."""

    path: str  # what the runner loads: a folder, a .gguf file, a hub or served model name
    step: int | None
    fingerprint: str
    training: dict | None  # harness_training.json beside config.json, if present
    local: bool
    kind: str = "checkpoint"  # the model-source kind (harness/models/sources/): checkpoint, gguf, openai
    model: str | None = None  # the model itself, for run.model: a plain folder, a run's folder, a GGUF name
    label: str | None = None  # its part of the default run name (None: derived from the path)
    sha256: str | None = None  # the whole file's sha256, for single-file models (GGUF)

    def __hash__(self) -> int:  # the training dict is unhashable; path + fingerprint identify it
        return hash((self.path, self.fingerprint))

    def to_dict(self) -> dict:
        """The form results.json records (run.checkpoints[])."""
        out = {"path": self.path, "step": self.step, "fingerprint": self.fingerprint, "training": self.training}
        if self.kind != "checkpoint":
            out["kind"] = self.kind
        if self.sha256 is not None:
            out["sha256"] = self.sha256
        return out

    def ref(self) -> dict:
        """The form every store record carries (record["checkpoint"])."""
        out: dict = {"path": self.path, "step": self.step, "fingerprint": self.fingerprint}
        if self.model is not None:  # run.model as eval names it, for a store's re-aggregation
            out["model"] = self.model
        return out


def split_spec(spec: str) -> list[str]:
    """Comma-split outside <...> (a range never holds a comma, but be exact about it)."""
    items: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in spec:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            items.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    items.append("".join(cur).strip())
    return items


def _glob_to_regex(pattern: str) -> str:
    """A glob (with the range already replaced by a group) -> regex matching glob's results."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "*":
            out.append(r"[^/]*")
        elif ch == "?":
            out.append(r"[^/]")
        elif ch == "[":
            j = pattern.find("]", i + 1)
            if j == -1:
                out.append(re.escape(ch))
            else:
                body = pattern[i + 1 : j]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body + "]")
                i = j
        elif ch == "\0":  # placeholder for the <A..B> range
            out.append(r"([0-9]+)")
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _expand_range(item: str) -> list[str]:
    ranges = list(_RANGE.finditer(item))
    if len(ranges) != 1:
        raise UserError(
            f"checkpoint spec {item!r} has {len(ranges)} <A..B> ranges: use exactly one, e.g. runs/anchor/ckpt-<1950..2000>"
        )
    m = ranges[0]
    lo, hi = int(m.group(1)), int(m.group(2))
    if lo > hi:
        raise UserError(
            f"reversed checkpoint range <{lo}..{hi}> in {item!r}: write the smaller step first, <{hi}..{lo}>"
        )
    with_placeholder = item[: m.start()] + "\0" + item[m.end() :]
    regex = re.compile(_glob_to_regex(os.path.expanduser(with_placeholder)))
    found = []
    for path in glob.glob(os.path.expanduser(with_placeholder.replace("\0", "*"))):
        hit = regex.fullmatch(path)
        if hit and lo <= int(hit.group(1)) <= hi and os.path.isdir(path):
            found.append(path)
    if not found:
        raise UserError(
            f"no checkpoint directory matches {item!r} (steps {lo}..{hi}): check the path and the step range"
            + _set_aside_hint(item)
        )
    return found


def _set_aside_hint(item: str) -> str:
    """A training run killed while replacing a checkpoint leaves it as .old-<name> beside the
    pattern's folder (training/checkpointing.py); say so instead of only "no match"."""
    folder = os.path.dirname(os.path.expanduser(item).replace("\0", "")) or "."
    try:
        aside = sorted(n for n in os.listdir(folder) if n.startswith(".old-"))
    except OSError:
        return ""
    if not aside:
        return ""
    return (
        f"; {folder} holds {', '.join(aside[:3])}{' ...' if len(aside) > 3 else ''}: a checkpoint a training run "
        "was replacing when it stopped; re-run its train command (it finishes the replacement) or rename it"
    )


def expand_item(item: str) -> list[tuple[str, bool]]:
    """One spec item of checkpoint folders -> [(path or hub name, is_local)]."""
    if not item:
        raise UserError("empty item in --ckpts: write paths separated by single commas")
    if _RANGE.search(item):
        return [(p, True) for p in _expand_range(item)]
    if item.startswith("hub:"):
        return [(item[4:], False)]
    path = os.path.expanduser(item)
    if _GLOB_CHARS & set(item):
        found = [p for p in glob.glob(path) if os.path.isdir(p)]
        if not found:
            raise UserError(f"no checkpoint directory matches {item!r}: check the pattern" + _set_aside_hint(item))
        return [(p, True) for p in found]
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise UserError(
                f"checkpoint {item!r} is a file: pass the model directory that holds config.json, or a .gguf file"
            )
        return [(path, True)]
    first = item.split("/")[0]
    if _HUB_NAME.match(item) and not os.path.isdir(first):
        return [(item, False)]
    raise UserError(f"no checkpoint matches {item!r}: no such directory (hub names look like org/name or hub:name)")


def _weight_files(path: Path) -> list[Path]:
    return sorted({f for pat in WEIGHT_PATTERNS for f in path.glob(pat) if f.is_file()})


def _check_loadable(path: Path) -> list[Path]:
    if not (path / "config.json").is_file():
        raise UserError(f"{path} is not a loadable model: no config.json (pass a save_pretrained directory)")
    weights = _weight_files(path)
    if not weights:
        raise UserError(f"{path} is not a loadable model: no *.safetensors or pytorch_model*.bin weights")
    for index_name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        index = path / index_name
        if index.is_file():
            try:
                shards = set(json.loads(index.read_text())["weight_map"].values())
            except (ValueError, KeyError, TypeError) as exc:
                raise UserError(f"{index} is corrupt ({exc.__class__.__name__}): re-save the checkpoint") from None
            missing = sorted(s for s in shards if not (path / s).is_file())
            if missing:
                raise UserError(f"{path} is not a loadable model: shard {missing[0]} named in {index_name} is missing")
    return weights


def _file_digest(path: Path) -> str:
    """sha256 of the first and last 1 MiB (the whole file when under 2 MiB)."""
    h = hashlib.sha256()
    size = path.stat().st_size
    with open(path, "rb") as f:
        if size <= 2 * _CHUNK:
            h.update(f.read())
        else:
            h.update(f.read(_CHUNK))
            f.seek(size - _CHUNK)
            h.update(f.read(_CHUNK))
    return h.hexdigest()


def weight_files(path: str | Path) -> list[Path]:
    """The weight files of a model directory (*.safetensors, pytorch_model*.bin), by name."""
    return _weight_files(Path(path))


def incomplete_reason(path: str | Path) -> str | None:
    """Why `path` is an incomplete training checkpoint, or None when it is complete or a plain model.

    - an in-progress marker: a write that never finished (a killed or failed run);
    - a completion marker: complete when every file it lists is present;
    - neither marker but harness_training.json (written before markers existed): complete when
      config.json and the weights (every shard an index names) are present and the tokenizer files
      are whole: tokenizer.json and tokenizer_config.json both present (or both absent: some tools
      store no tokenizer with a checkpoint);
    - neither marker nor harness_training.json: a plain Hugging Face model directory, never
      "incomplete" (a missing config or weights stays the loadability error it always was).
    """
    path = Path(path)
    if (path / IN_PROGRESS_FILE).exists():
        return f"{IN_PROGRESS_FILE} marks an unfinished write"
    marker = path / COMPLETE_FILE
    if marker.is_file():
        try:
            files = json.loads(marker.read_text())["files"]
            assert isinstance(files, dict)
        except (ValueError, KeyError, TypeError, AssertionError, OSError):
            return f"{COMPLETE_FILE} is unreadable"
        missing = sorted(name for name in files if not (path / name).is_file())
        return f"{missing[0]} is missing" if missing else None
    if not (path / TRAINING_FILE).is_file():
        return None
    if not (path / "config.json").is_file():
        return "config.json is missing"
    have = [(path / name).is_file() for name in _TOKENIZER_PAIR]
    if any(have) and not all(have):
        return f"{_TOKENIZER_PAIR[have.index(False)]} is missing"
    try:
        _check_loadable(path)
    except UserError:
        return "its weights are missing"
    return None


def fingerprint(path: str | Path) -> str:
    """The local checkpoint's fingerprint (see the module docstring); 16 hex digits."""
    path = Path(path)
    weights = _check_loadable(path)
    h = hashlib.sha256()
    h.update(b"config.json\0" + (path / "config.json").read_bytes() + b"\0")
    for f in weights:
        h.update(f"{f.name}\0{f.stat().st_size}\0{_file_digest(f)}\0".encode())
    return h.hexdigest()[:16]


def hub_fingerprint(name: str) -> str:
    """A hub model is identified by its name and revision: "hub:org/name@rev"."""
    return f"hub:{name}"


def step_of(path: str) -> int | None:
    m = _TRAILING_INT.search(Path(path).name)
    return int(m.group(1)) if m else None


def _read_training(path: Path) -> dict | None:
    f = path / TRAINING_FILE
    if not f.is_file():
        return None
    try:
        data = json.loads(f.read_text())
    except ValueError:
        raise UserError(f"{f} is not valid JSON: restore it or delete it (it only records training settings)") from None
    if not isinstance(data, dict):
        raise UserError(f"{f} is not a JSON object: restore it or delete it")
    return data


def model_of(path: str, step: int | None) -> str:
    """The model a checkpoint belongs to (results' run.model): a training run's folder for its
    ckpt-<step>, else the folder itself."""
    return (os.path.dirname(path) or ".") if step is not None else path


def load_checkpoint(path: str) -> Checkpoint:
    """A local directory -> Checkpoint (UserError when it is not a loadable model)."""
    p = Path(path)
    step = step_of(path)
    norm = os.path.normpath(path)
    return Checkpoint(
        path=norm,
        step=step,
        fingerprint=fingerprint(p),
        training=_read_training(p),
        local=True,
        model=model_of(norm, step),
    )


def tokenizer_fingerprint(path: str | Path) -> str | None:
    """sha256 (16 hex) over the tokenizer files in a directory; None when it has none."""
    path = Path(path)
    present = [name for name in TOKENIZER_FILES if (path / name).is_file()]
    if not present:
        return None
    h = hashlib.sha256()
    for name in present:
        h.update(name.encode() + b"\0" + (path / name).read_bytes() + b"\0")
    return h.hexdigest()[:16]


def check_same_tokenizer(ckpts: list[Checkpoint]) -> None:
    """UserError when local checkpoints carry different tokenizer files (hub ones are not read)."""
    seen: dict[str | None, str] = {}
    for c in ckpts:
        if c.local:
            seen.setdefault(tokenizer_fingerprint(c.path), c.path)
    if len(seen) > 1:
        (fa, pa), (fb, pb) = list(seen.items())[:2]

        def what(f):
            return "no tokenizer files" if f is None else f"tokenizer {f}"

        raise UserError(
            f"checkpoints use different tokenizers: {pa} has {what(fa)}, {pb} has {what(fb)}; "
            "evaluate them in separate runs (or re-save them with the same tokenizer)"
        )


def _safe_name(text: str) -> str:
    return re.sub(r"[^\w.+-]+", "_", text).strip("_") or "run"


def run_name_default(ckpts: list[Checkpoint]) -> str:
    """The checkpoints' parent folder name (a step-less dir or hub model: its own name).

    Checkpoints from several folders give their names joined by "+".
    """
    names: list[str] = []
    for c in ckpts:
        if c.label is not None:
            name = c.label
        elif not c.local:
            name = c.path.split("@")[0].rstrip("/").split("/")[-1]
        elif c.step is not None:
            name = Path(os.path.abspath(c.path)).parent.name
        else:
            name = Path(os.path.abspath(c.path)).name
        if name not in names:
            names.append(name)
    return _safe_name("+".join(names))
