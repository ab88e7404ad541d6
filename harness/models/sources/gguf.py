"""GGUF model files, and models packaged as one (`--ckpts smollm2-135m-instruct`).

    --ckpts model.Q4_1.gguf      --ckpts 'models/*.gguf'      --ckpts smollm2-135m-instruct

transformers reads a GGUF file through the gguf package and dequantises its tensors
(`from_pretrained(folder, gguf_file=name)`); the runners load it that way (`load_target`).

Identity: the fingerprint is "gguf:" + the first 16 hex digits of the file's sha256 and results.json
names the whole sha256 (checkpoint.sha256), so a result can be matched to a published file. The
hash is computed once per file version and kept in the cache ($HARNESS_CACHE/gguf/sha256/, keyed by
the real path, size, mtime and inode).

Tokenizer: transformers converts the GGUF's tokenizer on every load (seconds). The first use writes
the converted tokenizer to $HARNESS_CACHE/gguf/<fingerprint>/tokenizer (a temp folder renamed into
place) and keeps it only when it loads back with the same fingerprint and chat template; planning
and the runners then load that folder, so prompts are counted with exactly the runner's tokenizer.
That first conversion is also the check that transformers can read the file's architecture.

Checks before any work: the header (harness/models/sources/gguf_header.py: damaged or truncated files),
its metadata against the checkpoint-config schema (harness/models/sources/config_schema.py), the
architecture, and for --backend vllm whether the installed vLLM reads GGUF at all.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
from pathlib import Path

from harness.core.errors import UserError
from harness.models.checkpoints import Checkpoint
from harness.models.sources.base import LoadTarget, ModelSource, register_kind
from harness.models.sources.packaged import PACKAGED, SETUP, is_packaged_name, locate

SUFFIX = ".gguf"
_HASH_CHUNK = 1 << 22


def cache_root() -> Path:
    return Path(os.environ.get("HARNESS_CACHE", Path.home() / ".cache" / "longctx-harness")) / "gguf"


def is_gguf_path(path: str) -> bool:
    return path.lower().endswith(SUFFIX)


def file_sha256(path: Path) -> str:
    """The file's sha256, cached per (real path, size, mtime_ns, inode)."""
    st = path.stat()
    real = os.path.realpath(path)
    stamp = {"path": real, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino}
    entry = cache_root() / "sha256" / (hashlib.sha256(real.encode()).hexdigest()[:24] + ".json")
    try:
        cached = json.loads(entry.read_text())
        if isinstance(cached, dict) and all(cached.get(k) == v for k, v in stamp.items()):
            digest = cached.get("sha256")
            if isinstance(digest, str) and len(digest) == 64:
                return digest
    except (OSError, ValueError):
        pass  # no entry yet, or an unreadable one: hash again
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            h.update(chunk)
    digest = h.hexdigest()
    try:
        from harness.core.atomic import atomic_write

        atomic_write(entry, json.dumps({**stamp, "sha256": digest}))
    except UserError:
        pass  # a read-only or full cache: the next run hashes again
    return digest


def _tokenizer_dir(fingerprint: str) -> Path:
    return cache_root() / fingerprint.split(":", 1)[-1] / "tokenizer"


def _unreadable(path: Path, exc: BaseException) -> UserError:
    from importlib.metadata import version

    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    return UserError(
        f"{path}: transformers {version('transformers')} cannot read this GGUF file ({first}): "
        "pass a model of an architecture it supports, or a save_pretrained folder"
    )


def load_tokenizer_direct(path: Path):
    """The tokenizer as transformers converts it from the GGUF file (seconds)."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    if _gguf_missing():
        raise UserError(f"reading GGUF files needs the gguf package: {SETUP}")
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # its conversion warnings are not the user's concern
    try:
        return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name, local_files_only=True)
    except (ValueError, OSError, KeyError, TypeError, NotImplementedError) as exc:
        raise _unreadable(path, exc) from None
    finally:
        hf_logging.set_verbosity(verbosity)


def prepare_tokenizer(path: Path, fingerprint: str) -> Path | None:
    """The cached converted tokenizer folder (written on first use); None when it cannot be kept
    (a read-only cache, or a conversion that does not load back identically): load directly then."""
    final = _tokenizer_dir(fingerprint)
    if (final / "tokenizer_config.json").is_file():
        return final
    from harness.models.tokenization import load_tokenizer, tokenizer_fingerprint

    tok = load_tokenizer_direct(path)
    tmp = final.with_name(f".tmp-tokenizer-{os.getpid()}")
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        tok.save_pretrained(str(tmp))
        again = load_tokenizer(str(tmp))
        same = tokenizer_fingerprint(again) == tokenizer_fingerprint(tok) and getattr(
            again, "chat_template", None
        ) == getattr(tok, "chat_template", None)
        if not same:
            shutil.rmtree(tmp, ignore_errors=True)
            return None
        try:
            os.replace(tmp, final)
        except OSError:  # another process renamed its copy in first: theirs is the same
            shutil.rmtree(tmp, ignore_errors=True)
        return final
    except (OSError, UserError):
        shutil.rmtree(tmp, ignore_errors=True)
        return None


def _gguf_missing() -> bool:
    import importlib.util

    return importlib.util.find_spec("gguf") is None


def vllm_reads_gguf() -> bool:
    """Whether the installed vLLM has its GGUF loader (recent versions dropped it); looked up on
    disk, without importing vLLM."""
    import importlib.util

    spec = importlib.util.find_spec("vllm")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        if (Path(folder) / "model_executor" / "layers" / "quantization" / "gguf.py").is_file():
            return True
    return False


def drop_quantization_marker(model) -> None:
    """A model loaded from GGUF is dequantised but still marked quantized, and save_pretrained
    refuses to write it; the weights are plain tensors, so the marker is dropped."""
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.is_quantized = False


@register_kind
class GGUFSource(ModelSource):
    kind = "gguf"
    priority = 10

    @classmethod
    def claims(cls, item: str) -> bool:
        return is_gguf_path(item) or (is_packaged_name(item) and not os.path.exists(item))

    @classmethod
    def expand(cls, item: str) -> list[ModelSource]:
        if is_packaged_name(item) and not is_gguf_path(item):
            name = item.lower()
            return [cls._from_file(locate(name), name)]
        path = os.path.expanduser(item)
        if set("*?[") & set(item):
            files = sorted(p for p in glob.glob(path) if os.path.isfile(p))
            if not files:
                raise UserError(f"no GGUF file matches {item!r}: check the pattern")
            return [cls._from_file(Path(p), None) for p in files]
        if not os.path.isfile(path):
            known = ", ".join(sorted(PACKAGED))
            raise UserError(f"no GGUF file {item!r}: check the path (packaged models are named without .gguf: {known})")
        return [cls._from_file(Path(path), None)]

    @classmethod
    def _from_file(cls, path: Path, name: str | None) -> GGUFSource:
        digest = file_sha256(path)
        norm = os.path.normpath(str(path))
        stem = path.name[: -len(SUFFIX)]
        ck = Checkpoint(
            path=norm,
            step=None,
            fingerprint="gguf:" + digest[:16],
            training=None,
            local=True,
            kind=cls.kind,
            model=name or norm,
            label=name or stem,
            sha256=digest,
        )
        return cls(ck)

    @classmethod
    def owns(cls, path: str) -> bool:
        return is_gguf_path(path) and os.path.isfile(path)

    @classmethod
    def load_target(cls, path: str) -> LoadTarget:
        p = Path(path)
        folder, kwargs = str(p.parent), {"gguf_file": p.name}
        tok = _tokenizer_dir("gguf:" + file_sha256(p)[:16])
        if (tok / "tokenizer_config.json").is_file():
            return LoadTarget(folder, kwargs, str(tok), {})
        return LoadTarget(folder, kwargs, folder, dict(kwargs))

    # -- one file ---------------------------------------------------------------------------------
    def __init__(self, checkpoint: Checkpoint):
        super().__init__(checkpoint)
        self._header = None
        self._tokenizers: dict[bool, object] = {}

    @property
    def header(self):
        if self._header is None:
            from harness.models.sources.gguf_header import read_header

            self._header = read_header(self.checkpoint.path)
        return self._header

    def config_view(self) -> dict:
        """The header's model settings under config.json's names (checked by the same schema)."""
        h = self.header
        names = {
            "context_length": "max_position_embeddings",
            "embedding_length": "hidden_size",
            "block_count": "num_hidden_layers",
            "feed_forward_length": "intermediate_size",
            "attention.head_count": "num_attention_heads",
            "attention.head_count_kv": "num_key_value_heads",
            "rope.freq_base": "rope_theta",
            "vocab_size": "vocab_size",
        }
        return {ours: h.arch_value(key) for key, ours in names.items() if h.arch_value(key) is not None}

    def check(self, backend: str) -> None:
        from harness.models.sources.config_schema import validate_config

        path = Path(self.checkpoint.path)
        if backend == "vllm" and not vllm_reads_gguf():
            raise UserError(
                f"the installed vLLM cannot load GGUF files ({path.name}): convert it once with "
                f"`harness convert {self.checkpoint.model} --out DIR` and pass DIR, or use --backend hf"
            )
        if _gguf_missing():
            raise UserError(f"reading GGUF files needs the gguf package: {SETUP}")
        validate_config(self.config_view(), f"{path} (GGUF metadata)")
        self.load_tokenizer(
            light=True
        )  # the first conversion is where transformers names an architecture it cannot read

    def tokenizer_id(self) -> tuple[str, str | None] | None:
        return ("gguf", self.header.tokenizer_digest)

    def after_load(self, model) -> None:
        drop_quantization_marker(model)

    def load_tokenizer(self, light: bool = False):
        if light not in self._tokenizers:
            self.header  # noqa: B018  (a damaged file is named by the header check, not by transformers)
            path = Path(self.checkpoint.path)
            folder = prepare_tokenizer(path, self.checkpoint.fingerprint)
            if folder is not None:
                from harness.models.tokenization import load_generation_tokenizer, load_tokenizer

                loader = load_generation_tokenizer if light else load_tokenizer
                self._tokenizers[light] = loader(str(folder))
            else:
                self._tokenizers[light] = load_tokenizer_direct(path)
        return self._tokenizers[light]

    @classmethod
    def context_of(cls, path: str, max_model_len: int | None) -> int:
        from harness.models.sources.gguf_header import read_header

        if max_model_len:
            return int(max_model_len)
        header = read_header(path)
        if not header.context_length:
            raise UserError(f"{path} states no {header.architecture}.context_length: pass --max-model-len")
        return header.context_length

    def context_length(self, max_model_len: int | None) -> int:
        if max_model_len:
            return int(max_model_len)
        if not self.header.context_length:
            raise UserError(
                f"{self.checkpoint.path} states no {self.header.architecture}.context_length: pass --max-model-len"
            )
        return self.header.context_length


def load_model(path: str | Path, **kwargs):
    """The model of a GGUF file, dequantised by transformers, without the quantization marker (so
    it saves like any model: training checkpoints, `harness convert`)."""
    from transformers import AutoModelForCausalLM

    p = Path(path)
    if _gguf_missing():
        raise UserError(f"reading GGUF files needs the gguf package: {SETUP}")
    try:
        model = AutoModelForCausalLM.from_pretrained(str(p.parent), gguf_file=p.name, **kwargs)
    except (ValueError, OSError, KeyError, NotImplementedError) as exc:
        raise _unreadable(p, exc) from None
    drop_quantization_marker(model)
    return model


def convert_gguf(src: GGUFSource, out: Path, dtype: str) -> Path:
    """Write `src` as a save_pretrained folder at `out` (see harness/commands/convert.py): into a
    temporary folder beside it, checked, then renamed into place."""
    import torch

    from harness.core.atomic import os_error
    from harness.models.sources.config_schema import check_config_and_shapes

    ck = src.checkpoint
    tokenizer = src.load_tokenizer()
    model = load_model(ck.path, dtype=getattr(torch, dtype))
    tmp = out.parent / f".tmp-{out.name}-{os.getpid()}"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        from importlib.metadata import version

        (tmp / "harness_source.json").write_text(
            json.dumps(
                {
                    "kind": "gguf",
                    "path": os.path.abspath(ck.path),
                    "sha256": ck.sha256,
                    "dtype": dtype,
                    "transformers": version("transformers"),
                },
                indent=2,
            )
            + "\n"
        )
        check_config_and_shapes(tmp)  # what was written is a checkpoint this harness accepts
        os.rename(tmp, out)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise os_error(out, exc) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out
