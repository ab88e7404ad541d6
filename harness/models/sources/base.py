"""The model-source interface and the registry of kinds.

A model source is where the model of a run comes from: a checkpoint folder (or hub name), a GGUF
file (or a model packaged as one), a served endpoint. Each kind is one module of this package
holding one `ModelSource` subclass decorated with `@register_kind`; planning, the runners and the
commands talk to this interface only, so adding a kind is adding a module (and its tests).

A kind answers, as class methods, which inputs are its own:
  claims(item)        an item of --ckpts (a path, a glob, a name) is of this kind
  expand(item)        that item -> its sources (a glob or step range gives several)
  from_config(cfg)    the whole model comes from other flags (a served endpoint: --backend openai
                      --model --base-url); None when the configuration is not of this kind
  owns(path)          a source's `checkpoint.path` is of this kind (runners load by path)
  load_target(path)   what transformers (or vLLM) needs to load that path
and, per source:
  checkpoint          the identity records carry (path, step, fingerprint) plus run metadata
  check(backend)      cheap validation before any work: one-line UserError on a bad model
  incomplete()        why a training checkpoint is unfinished (skipped with a warning), or None
  tokenizer_id()      a cheap id to compare the tokenizers of several sources
  load_tokenizer(light)  the tokenizer prompts are built and counted with (the runner's own)
  context_length(n)   the context a run uses (n: --max-model-len; the class method context_of(path, n)
                      answers the same for a path, as the runners ask)
  runner_settings(cfg, context), record_settings(cfg), provenance()
                      what this kind adds to the runner settings, to every record's settings
                      (part of its identity) and to results.json
  filter_tasks(...)   tasks this source cannot run, moved to `unavailable` with the reason
  after_load(model)   what a loaded model needs before it is trained or saved
  context_fix         the remedy named when a length exceeds the context
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
from dataclasses import dataclass, field
from typing import Any, ClassVar

from harness.core.errors import UserError
from harness.models.checkpoints import Checkpoint, split_spec

CONTEXT_FIX = (
    "drop that length from --lengths, or run past the trained length with --max-model-len and "
    "--rope-scaling/--rope-theta"
)


@dataclass(frozen=True)
class LoadTarget:
    """What `from_pretrained` needs: `model` and `kwargs` for the config and weights, `tokenizer` and
    `tokenizer_kwargs` for the tokenizer (a GGUF file: its folder and gguf_file=NAME)."""

    model: str
    kwargs: dict = field(default_factory=dict)
    tokenizer: str = ""
    tokenizer_kwargs: dict = field(default_factory=dict)


class ModelSource:
    """One model of a run; see the module docstring. Subclasses set `kind` and implement the
    methods that have no default here."""

    kind: ClassVar[str] = ""
    priority: ClassVar[int] = 50  # kinds are asked in this order; the folder kind (the fallback) asks last
    context_fix: ClassVar[str] = CONTEXT_FIX

    def __init__(self, checkpoint: Checkpoint):
        self.checkpoint = checkpoint

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.checkpoint.path!r})"

    # -- which inputs are this kind's ---------------------------------------------------------
    @classmethod
    def claims(cls, item: str) -> bool:
        return False

    @classmethod
    def expand(cls, item: str) -> list[ModelSource]:
        raise NotImplementedError

    @classmethod
    def from_config(cls, cfg: Any) -> list[ModelSource] | None:
        return None

    @classmethod
    def owns(cls, path: str) -> bool:
        return False

    @classmethod
    def load_target(cls, path: str) -> LoadTarget:
        return LoadTarget(path, {}, path, {})

    @classmethod
    def context_of(cls, path: str, max_model_len: int | None) -> int:
        """The context of the model at `path` (a checkpoint.path of this kind); `max_model_len` wins."""
        raise NotImplementedError

    # -- one source -----------------------------------------------------------------------------
    def check(self, backend: str) -> None:
        """Cheap validation before any work (headers and configs, never the weights)."""

    def incomplete(self) -> str | None:
        return None

    def tokenizer_id(self) -> tuple[str, str | None] | None:
        """(namespace, id): sources of one namespace compare ids; across namespaces the loaded
        tokenizers are compared (see `check_same_tokenizer`). None: not compared (a hub model,
        which may be unreachable until its runner loads it)."""
        raise NotImplementedError

    def load_tokenizer(self, light: bool = False):
        """The tokenizer; `light`: a harness.models.tokenization.LightTokenizer where it is exact (the same
        ids, texts and fingerprint without importing transformers and torch: planning a run that
        has nothing to compute stays fast); it has no chat template."""
        raise NotImplementedError

    def context_length(self, max_model_len: int | None) -> int:
        return type(self).context_of(self.checkpoint.path, max_model_len)

    def runner_settings(self, cfg: Any, context: int) -> dict:
        """RunnerSettings fields this kind sets (the rest come from the command line)."""
        return {}

    def record_settings(self, cfg: Any) -> dict:
        """Record-settings fields this kind sets or replaces (each is part of the record's identity
        unless harness.core.identity lists it as neutral; None leaves a field out)."""
        return {}

    def provenance(self) -> dict:
        return {}

    def filter_tasks(self, tasks: list, unavailable: dict, tokenizer) -> list:
        return tasks

    def after_load(self, model) -> None:
        """Called on a model loaded for training or conversion (a GGUF model drops its
        quantization marker, or save_pretrained refuses it)."""


_KINDS: dict[str, type[ModelSource]] = {}
_discovered = False
# Modules of this package that are not kinds.
_NOT_KINDS = frozenset({"base", "config_schema", "gguf_header", "packaged", "tokenizer_cache"})


def register_kind(cls: type[ModelSource]) -> type[ModelSource]:
    """Class decorator: make `cls` a kind of model source."""
    old = _KINDS.get(cls.kind)
    if old is not None and old is not cls:
        raise ValueError(f"model source kind {cls.kind!r} registered twice ({old} and {cls})")
    _KINDS[cls.kind] = cls
    return cls


def kinds() -> list[type[ModelSource]]:
    """Every registered kind, in the order they are asked."""
    global _discovered
    if not _discovered:
        # This package's modules, found beside this file (the package itself is not imported here:
        # its __init__ imports this module).
        package = __name__.rpartition(".")[0]
        for info in sorted(pkgutil.iter_modules([os.path.dirname(__file__)]), key=lambda m: m.name):
            if info.name not in _NOT_KINDS and not info.name.startswith("_"):
                importlib.import_module(f"{package}.{info.name}")
        _discovered = True
    return sorted(_KINDS.values(), key=lambda k: (k.priority, k.kind))


def kind_of_path(path: str) -> type[ModelSource]:
    """The kind a source's checkpoint.path belongs to (the folder kind when no other owns it)."""
    for kind in kinds():
        if kind.owns(path):
            return kind
    return _KINDS["checkpoint"]


def load_target(path: str) -> LoadTarget:
    """What a runner passes to from_pretrained for a source's checkpoint.path."""
    return kind_of_path(path).load_target(path)


def _expand(item: str) -> list[ModelSource]:
    if not item:
        raise UserError("empty item in --ckpts: write paths separated by single commas")
    for kind in kinds():
        if kind.claims(item):
            return kind.expand(item)
    raise UserError(f"no model source matches {item!r}")  # the folder kind claims every item


def vanished(source) -> bool:
    """Whether a local checkpoint (a folder or a GGUF file; a source, or a Checkpoint) is gone since
    it was matched."""
    ck = getattr(source, "checkpoint", source)
    if not ck.local or ck.kind not in ("checkpoint", "gguf"):  # a name another kind resolves: never "gone"
        return False
    return not os.path.exists(ck.path)


def warn_vanished(path: str) -> None:
    print(
        f"warning: skipping checkpoint {path}: it was deleted after it matched --ckpts (a training run's "
        "--keep-last pruning it?)",  # what was evaluated after all, the run's last line says
        file=sys.stderr,
    )


def still_there(sources: list, spec: str = "") -> list:
    """The sources whose folders still exist; each one gone is skipped with one line. UserError when
    none is left."""
    alive = []
    for s in sources:
        if vanished(s):
            warn_vanished(s.checkpoint.path)
        else:
            alive.append(s)
    if not alive:
        raise UserError(
            f"every checkpoint matching {spec!r} was deleted while this run planned (a training run's --keep-last?): "
            "evaluate after the training run, or pass checkpoints it keeps"
        )
    return alive


def select_sources(spec: str, last: int | None = None) -> list[ModelSource]:
    """--ckpts SPEC [--last N] -> sources sorted by step (step-less first, by path), deduplicated,
    incomplete training checkpoints skipped with a warning; UserError on any bad input."""
    if not spec or not spec.strip():
        raise UserError("empty --ckpts: pass a checkpoint path, glob, <A..B> range, .gguf file or model name")
    if last is not None and last < 1:
        raise UserError(f"--last {last}: pass a positive number of checkpoints")
    found: dict[str, ModelSource] = {}  # by real path (or name): one source however often it is named
    for item in split_spec(spec):
        for src in _expand(item):
            c = src.checkpoint
            key = os.path.realpath(c.path) if c.local else f"{src.kind}:{c.path}"
            found.setdefault(key, src)
    sources, incomplete = [], []
    for src in found.values():
        why = src.incomplete()
        if why is not None:  # a training run stopped while writing it: evaluating it would abort or mislead
            incomplete.append(f"{src.checkpoint.path} ({why})")
        else:
            sources.append(src)
    if not sources and not incomplete:  # every match deleted before it was read
        still_there([], spec)
    if not sources:  # the error alone, one line: the skipped ones are what it says
        raise UserError(
            f"every checkpoint matching {spec!r} is incomplete ({len(incomplete)} skipped, e.g. {incomplete[0]}): "
            "re-run the training command to rewrite them, or pass other checkpoints"
        )
    for what in incomplete:  # some remain: each one skipped is said, and the run goes on
        print(
            f"warning: skipping incomplete checkpoint {what}: re-run its training command to rewrite it, or delete it",
            file=sys.stderr,
        )
    sources.sort(key=lambda s: (s.checkpoint.step is not None, s.checkpoint.step or 0, s.checkpoint.path))
    if last is not None:
        stepped = sum(s.checkpoint.step is not None for s in sources)
        if stepped < last < len(sources):
            stepless = next(s.checkpoint.path for s in sources if s.checkpoint.step is None)
            raise UserError(
                f"--last {last} picks checkpoints by step, but {stepless} has no step in its name "
                "(ckpt-<N>, checkpoint-<N>, step<N>, iter_<N>): list the checkpoints in --ckpts instead"
            )
        if last > len(sources):
            raise UserError(
                f"--last {last} but only {len(sources)} checkpoint(s) match {spec!r}: lower --last or widen --ckpts"
            )
        sources = sources[-last:]
    return sources


def resolve_sources(cfg: Any) -> list[ModelSource]:
    """The model sources of an eval configuration: a kind that takes the whole configuration (a
    served endpoint), else the --ckpts spec. Each kind validates its own flags here."""
    for kind in kinds():
        found = kind.from_config(cfg)
        if found is not None:
            return found
    return select_sources(cfg.ckpts, cfg.last)


def source_for(path: str) -> ModelSource:
    """The one source of a single model argument (train --model, diagnose --ckpt, convert SRC)."""
    found = select_sources(path)
    if len(found) != 1:
        raise UserError(f"{path!r} names {len(found)} models: pass one")
    return found[0]


def model_file_source(item: str) -> ModelSource | None:
    """The source of a single model argument claimed by a kind other than the folder kind (a GGUF
    file, a packaged model); None for folders and hub names, which the caller reads as before."""
    for kind in kinds():
        if kind.kind != "checkpoint" and kind.claims(item):
            return source_for(item)
    return None


def model_tokenizer(name_or_path: str, light: bool = False):
    """The tokenizer of a model argument (demo --model, diagnose --tokenizer, generate --tokenizer, a
    served model's): a model file's own (a .gguf file or a packaged model name), else
    harness.models.tokenization's for a directory or hub name (`light`: `load_generation_tokenizer`'s)."""
    model_file = model_file_source(name_or_path)  # a .gguf file or a packaged model name: its own tokenizer
    if model_file is not None:
        return model_file.load_tokenizer()
    from harness.models.tokenization import load_generation_tokenizer, load_tokenizer

    return load_generation_tokenizer(name_or_path) if light else load_tokenizer(name_or_path)


def select_checkpoints(spec: str, last: int | None = None) -> list[Checkpoint]:
    """Resolve --ckpts/--last to checkpoints sorted by step (every kind of model source:
    select_sources). UserError on any bad input."""
    return [s.checkpoint for s in select_sources(spec, last)]


def check_same_tokenizer(sources: list[ModelSource]) -> None:
    """UserError when the sources do not share one tokenizer. Sources of one namespace (folders:
    their tokenizer files) compare cheap ids; across namespaces (a GGUF file beside a folder) the
    loaded tokenizers' fingerprints are compared, one load per distinct id."""
    if len(sources) < 2:
        return
    by_id: dict[tuple[str, str | None], ModelSource] = {}
    for s in sources:
        ident = s.tokenizer_id()
        if ident is not None:
            by_id.setdefault(ident, s)
    if len(by_id) < 2:
        return
    namespaces = {ns for ns, _ in by_id}
    if len(namespaces) == 1:
        (ia, a), (ib, b) = list(by_id.items())[:2]
    else:
        from harness.models.tokenization import tokenizer_fingerprint

        seen: dict[str, ModelSource] = {}
        for s in by_id.values():
            seen.setdefault(tokenizer_fingerprint(s.load_tokenizer()), s)
        if len(seen) < 2:
            return
        (fa, a), (fb, b) = list(seen.items())[:2]
        ia, ib = ("tokenizer", fa), ("tokenizer", fb)

    def what(ident: tuple[str, str | None]) -> str:
        return "no tokenizer files" if ident[1] is None else f"tokenizer {ident[1]}"

    raise UserError(
        f"checkpoints use different tokenizers: {a.checkpoint.path} has {what(ia)}, {b.checkpoint.path} has "
        f"{what(ib)}; evaluate them in separate runs (or re-save them with the same tokenizer)"
    )


def run_model(sources: list[ModelSource]) -> str | list[str]:
    """results.json's run.model: the model itself (a folder, a training run's folder, a GGUF file or
    name, a served model's root); several distinct ones as a sorted list."""
    names = sorted({s.checkpoint.model or s.checkpoint.path for s in sources})
    return names[0] if len(names) == 1 else names
