"""Pick a runner by backend name; a backend is one module in this package that registers itself.

    runner = get_runner("hf", "runs/anchor/ckpt-2000", RunnerSettings(backend="hf"))

    # harness/models/runners/mybackend.py: the whole of adding a backend
    @register_runner("mine", requires="mylib", install="pip install mylib")
    class MyRunner: ...

Listing the names (`backend_names()`, the CLI's --backend choices) imports every module of this
package, so those modules keep their heavy imports (torch, transformers, vllm) inside functions;
tests/serve/test_registry.py checks that listing imports none of them. `requires` names a module
that must be importable for the backend to run: it is checked with importlib.util.find_spec, so a
missing optional extra gives one line naming the install command instead of an ImportError.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

from harness.core.errors import MissingExtra, UserError
from harness.models.runners.base import Runner, RunnerSettings

# Modules of this package that are not backends (prefix, decode, kvcache, rowcache: the hf runner's engine,
# which imports torch at once; replies: the served replies' schemas).
_NOT_BACKENDS = frozenset({"base", "common", "registry", "prefix", "decode", "kvcache", "rowcache", "replies"})


@dataclass(frozen=True)
class _Entry:
    factory: Callable[[str, RunnerSettings], Runner]
    requires: str | None
    install: str
    help: str
    local: bool  # runs checkpoint directories in this process (False: a served model, --model)
    record_settings: dict  # fields this backend adds to every record's settings (its identity)


_REGISTRY: dict[str, _Entry] = {}
_discovered = False


def register_runner(
    name: str,
    *,
    requires: str | None = None,
    install: str = "",
    help: str = "",
    local: bool = True,
    record_settings: dict | None = None,
):
    """Class decorator: make `cls(model_path, settings)` the runner of `--backend name`.

    `local` False marks a backend that evaluates a served model rather than checkpoint directories
    (`harness demo`, which evaluates the checkpoints it trains, offers only local ones).
    `record_settings`: constants of the backend that shape its arithmetic (the hf runner's decode
    width); every record it computes carries them, so they are part of the record's identity."""

    def wrap(cls):
        old = _REGISTRY.get(name)
        if old is not None and old.factory is not cls:
            raise ValueError(f"runner backend {name!r} registered twice ({old.factory} and {cls})")
        doc = help or (cls.__doc__ or name).strip().splitlines()[0]
        _REGISTRY[name] = _Entry(cls, requires, install, doc, local, dict(record_settings or {}))
        return cls

    return wrap


def _discover() -> None:
    """Import every backend module of this package once (each registers itself on import)."""
    global _discovered
    if _discovered:
        return
    import harness.models.runners as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name not in _NOT_BACKENDS and not info.name.startswith("_"):
            importlib.import_module(f"{pkg.__name__}.{info.name}")
    _discovered = True


def backend_names(local_only: bool = False) -> tuple[str, ...]:
    """Every registered backend ("hf" first, the default, then by name); `local_only`: those that
    run checkpoint directories."""
    _discover()
    names = [n for n, e in _REGISTRY.items() if e.local or not local_only]
    return tuple(sorted(names, key=lambda n: (n != "hf", n)))


def backend_help(local_only: bool = False) -> str:
    """One phrase per backend, for --help."""
    return "; ".join(f"{n}: {_REGISTRY[n].help}" for n in backend_names(local_only))


def is_local(name: str) -> bool:
    _discover()
    return _REGISTRY[name].local


def backend_record_settings(name: str) -> dict:
    """The fields `--backend name` adds to every record's settings ({} for an unknown name)."""
    _discover()
    entry = _REGISTRY.get(name)
    return dict(entry.record_settings) if entry else {}


def backend_available(name: str) -> bool:
    _discover()
    entry = _REGISTRY.get(name)
    return entry is not None and (entry.requires is None or importlib.util.find_spec(entry.requires) is not None)


def vllm_available() -> bool:
    return backend_available("vllm")


def get_runner(backend: str, model_path: str, settings: RunnerSettings) -> Runner:
    _discover()
    entry = _REGISTRY.get(backend)
    if entry is None:
        raise UserError(f"unknown backend {backend!r}: choose {', '.join(backend_names())}")
    if not backend_available(backend):
        raise MissingExtra(f"--backend {backend}", entry.install or f"pip install {entry.requires}")
    return entry.factory(model_path, settings)
