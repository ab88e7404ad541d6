"""Reading training documents and tokenizing them for packing.

Sources (`load_documents(source, tokenizer)`):
- a .jsonl / .jsonl.gz / .parquet file with a text field (default "text") and optionally a domain
  field (for --domain-tags) and a source field (for mixtures);
- a directory: every such file in it, and every pre-tokenized shard, in sorted name order;
- pre-tokenized shards: .npy (a 1-D integer array) or .bin (raw little-endian token ids, uint16
  when the vocabulary has at most 65536 entries, else uint32). Convention: the shard is the
  concatenation of documents, each ENDING in the tokenizer's EOS id; a BOS at a document start is
  dropped (documents are trained without BOS). A shard must end in EOS;
- anything else is taken as a Hugging Face hub dataset name, `NAME` or `NAME@SPLIT` (default
  split "train"), streamed through `datasets` (needs network).

Every document is tokenized WITHOUT special tokens and gets EOS appended; empty texts are skipped.
The window anchor (`anchor_id`) is BOS when the tokenizer adds one, else EOS (Qwen-style).

Run: ``python -m training.data SOURCE --tokenizer DIR`` prints document and token counts.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.errors import UserError

TEXT_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet")
TOKEN_SUFFIXES = (".npy", ".bin")
_BATCH = 256  # texts per tokenizer call: the fast tokenizer batches in Rust


@dataclass
class TokenizedDoc:
    ids: list[int]
    """Document tokens, no BOS, ending in EOS."""
    tag_ids: list[int] | None
    """Domain tag tokens to prepend (no loss on them), or None."""
    source: str
    """Mixture source: the source field, else the domain, else the file stem / dataset name."""


def anchor_id(tokenizer) -> int:
    """BOS when the tokenizer prepends BOS, else EOS (the paper's choice for Qwen)."""
    from harness.models.tokenization import adds_bos

    if adds_bos(tokenizer):
        return tokenizer.bos_token_id
    if tokenizer.eos_token_id is None:
        raise UserError("the tokenizer has neither BOS nor EOS: training needs one of them as the window anchor")
    return tokenizer.eos_token_id


def _suffix(path: Path) -> str:
    name = path.name.lower()
    return ".jsonl.gz" if name.endswith(".jsonl.gz") else path.suffix.lower()


def _regular(path: Path) -> Path:
    """path, if a regular file: a FIFO or device among the data would block or never end the read."""
    from harness.core.paths import file_kind

    kind = file_kind(path.stat().st_mode)
    if kind:
        raise UserError(f"data file {path} is {kind}, not a file: pass jsonl/parquet files or a folder of them")
    return path


def _files(source: str) -> list[Path] | None:
    path = Path(source).expanduser()
    if path.is_dir():
        files = sorted(_regular(p) for p in path.iterdir() if _suffix(p) in TEXT_SUFFIXES + TOKEN_SUFFIXES)
        if not files:
            raise UserError(f"no data files in {path}: expected {', '.join(TEXT_SUFFIXES + TOKEN_SUFFIXES)}")
        return files
    if path.exists() and not path.is_file():
        _regular(path)
    if path.is_file():
        if _suffix(path) not in TEXT_SUFFIXES + TOKEN_SUFFIXES:
            raise UserError(f"unsupported data file {path}: use {', '.join(TEXT_SUFFIXES + TOKEN_SUFFIXES)}")
        return [path]
    if source.startswith((".", "/", "~")) or source.endswith(TEXT_SUFFIXES + TOKEN_SUFFIXES):
        raise UserError(f"data not found: {source}; pass an existing file, directory or hub dataset name")
    return None


def _records_jsonl(path: Path) -> Iterator[dict]:
    gz = _suffix(path) == ".jsonl.gz"
    opener = gzip.open if gz else open
    n = 0
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for n, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise UserError(f"{path}:{n}: not valid JSON ({exc.msg}); fix or remove the line") from None
                if not isinstance(rec, dict):
                    raise UserError(
                        f"{path}:{n}: a JSON {type(rec).__name__}, not an object; write one object per line, "
                        'e.g. {"text": "..."}'
                    )
                yield rec
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{path}: not UTF-8 text near line {n + 1} ({exc.reason}); "
            "pass a UTF-8 JSON-lines file (one object per line)"
        ) from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        what = "not a gzip file" if isinstance(exc, gzip.BadGzipFile) else "a damaged or truncated gzip file"
        raise UserError(f"{path} is {what}: re-create it, or name it .jsonl if it is not compressed") from None


def _records_parquet(path: Path, fields: list[str]) -> Iterator[dict]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
        missing = [f for f in fields if f not in pf.schema_arrow.names]
        if missing:
            raise UserError(
                f"{path} has no column {missing[0]!r} (columns: {', '.join(pf.schema_arrow.names)}); pass the right field flag"
            )
        for batch in pf.iter_batches(columns=fields, batch_size=1024):
            yield from batch.to_pylist()
    except (pa.ArrowException, OSError) as exc:  # ArrowInvalid: not parquet, or damaged/truncated
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise UserError(f"{path} is not a readable parquet file ({first}): re-create or re-download it") from None


def _records_hub(name: str) -> Iterator[dict]:
    try:
        import datasets
    except ImportError:
        from harness.core.errors import MissingExtra

        raise MissingExtra("reading a hub dataset", "pip install datasets") from None
    name, _, split = name.partition("@")
    try:
        yield from datasets.load_dataset(name, split=split or "train", streaming=True)
    except Exception as exc:  # datasets raises many types for "not reachable / not found"  # noqa: BLE001
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UserError(
            f"cannot load hub dataset {name!r} ({first}); pass a local .jsonl/.parquet file or directory"
        ) from None


def _token_docs(path: Path, tokenizer) -> Iterator[list[int]]:
    import numpy as np

    dtype = "<u2" if len(tokenizer) <= 65536 else "<u4"
    try:
        if _suffix(path) == ".npy":
            arr = np.load(path, mmap_mode="r", allow_pickle=False)  # object arrays would unpickle
        elif path.stat().st_size == 0:
            arr = np.zeros(0, dtype=dtype)  # mmap cannot map an empty file
        else:
            arr = np.memmap(path, dtype=dtype, mode="r")
    except (ValueError, OSError, EOFError) as exc:  # not .npy, truncated, or a size not a multiple of the dtype
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise UserError(
            f"{path} is not a token shard ({first}): .npy must be a 1-D integer array, .bin raw {dtype} token ids"
        ) from None
    if not isinstance(arr, np.ndarray):  # np.load of an .npz archive
        raise UserError(f"{path} is not a token shard: .npy must hold one 1-D integer array")
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise UserError(f"{path}: a token shard must be a 1-D integer array, got {arr.dtype} of shape {arr.shape}")
    eos, bos = tokenizer.eos_token_id, tokenizer.bos_token_id
    if len(arr) == 0:
        return
    if int(arr[-1]) != eos:
        raise UserError(f"{path} does not end with EOS (id {eos}): every document in a token shard must end with EOS")
    ends = np.flatnonzero(np.asarray(arr) == eos)
    start = 0
    for end in ends.tolist():
        doc = arr[start : end + 1].tolist()
        if bos is not None and doc and doc[0] == bos:
            doc = doc[1:]
        if len(doc) > 1:  # a bare EOS is an empty document
            yield doc
        start = end + 1


def load_documents(
    source: str,
    tokenizer,
    *,
    text_field: str = "text",
    domain_field: str | None = None,
    source_field: str | None = None,
    limit: int | None = None,
) -> Iterator[TokenizedDoc]:
    """Tokenized documents from `source` (see the module docstring), at most `limit` of them."""
    files = _files(source)
    eos = tokenizer.eos_token_id
    if eos is None:
        raise UserError("the tokenizer has no EOS token: documents must end with EOS")
    reader = _DocumentReader(tokenizer, eos, text_field, domain_field, source_field, limit)
    if files is None:
        yield from reader.from_records(_records_hub(source), source, source.partition("@")[0])
        return
    for path in files:
        if reader.full():
            return
        suffix = _suffix(path)
        stem = path.name[: -len(suffix)]
        if suffix in TOKEN_SUFFIXES:
            if domain_field:
                raise UserError(f"{path} is pre-tokenized and has no domain field: drop --domain-tags or use text data")
            yield from reader.from_shard(path, stem)
        elif suffix == ".parquet":
            fields = list(dict.fromkeys(f for f in (text_field, domain_field, source_field) if f))
            yield from reader.from_records(_records_parquet(path, fields), str(path), stem)
        else:
            yield from reader.from_records(_records_jsonl(path), str(path), stem)


@dataclass
class _DocumentReader:
    """Turns records (or token shards) into TokenizedDocs for one load_documents call, counting them
    against `limit` over all its files; texts are tokenized _BATCH at a time."""

    tokenizer: Any
    eos: int
    text_field: str
    domain_field: str | None
    source_field: str | None
    limit: int | None
    count: int = 0
    tags: dict[str, list[int]] = field(default_factory=dict)

    def full(self) -> bool:
        return self.limit is not None and self.count >= self.limit

    def tag(self, domain) -> list[int]:
        """The domain tag's tokens, tokenized once per domain."""
        key = str(domain)
        if key not in self.tags:
            self.tags[key] = self.tokenizer(key, add_special_tokens=False)["input_ids"]
        return self.tags[key]

    def from_shard(self, path: Path, stem: str) -> Iterator[TokenizedDoc]:
        for ids in _token_docs(path, self.tokenizer):
            if self.full():
                return
            self.count += 1
            yield TokenizedDoc(ids, None, stem)

    def from_records(self, records: Iterator[dict], where: str, default_source: str) -> Iterator[TokenizedDoc]:
        pending: list[tuple[str, str | None, str]] = []
        for n, rec in enumerate(records, start=1):
            if self.full():
                break
            text, domain = self._fields(rec, n, where)
            if not text.strip():
                continue
            src = rec.get(self.source_field) if self.source_field else None
            pending.append(
                (text, domain, str(src if src is not None else domain if domain is not None else default_source))
            )
            self.count += 1
            if len(pending) >= _BATCH:
                yield from self._tokenized(pending)
        if pending:
            yield from self._tokenized(pending)

    def _fields(self, rec: dict, n: int, where: str) -> tuple[str, Any]:
        """The record's text and domain (None without --domain-tags), or one line naming what is missing."""
        text = rec.get(self.text_field)
        if not isinstance(text, str):
            raise UserError(
                f"{where}: record {n} has no text field {self.text_field!r}; pass --text-field with the right name"
            )
        domain = None
        if self.domain_field:
            domain = rec.get(self.domain_field)
            if domain is None or domain == "":
                raise UserError(
                    f"{where}: record {n} has no domain field {self.domain_field!r}; pass --domain-tags with a field every record has"
                )
        return text, domain

    def _tokenized(self, pending: list[tuple[str, str | None, str]]) -> Iterator[TokenizedDoc]:
        """The pending texts tokenized in one call, EOS appended; empties `pending`."""
        texts = [p[0] for p in pending]
        for (_text, domain, src), ids in zip(pending, self.tokenizer(texts, add_special_tokens=False)["input_ids"]):
            yield TokenizedDoc(ids + [self.eos], self.tag(domain) if self.domain_field else None, src)
        pending.clear()


def _main() -> None:
    import argparse

    from harness.models.sources import model_tokenizer

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--text-field", default="text")
    ap.add_argument("--domain-field")
    ap.add_argument("--limit", type=int)
    args = ap.parse_args()
    tok = model_tokenizer(args.tokenizer)
    n = t = 0
    for doc in load_documents(
        args.source, tok, text_field=args.text_field, domain_field=args.domain_field, limit=args.limit
    ):
        n += 1
        t += len(doc.ids)
    print(f"{n} documents, {t} tokens (anchor id {anchor_id(tok)})")


if __name__ == "__main__":
    _main()
