"""The demo's continued-pretraining corpus: the generated one (training/demo_corpus.py, sized in
lines of the model's own tokenizer, written once under --out) or the user's --data, and the
document-length statistics the demo prints and reasons with."""

from __future__ import annotations

from pathlib import Path

from harness.demo.config import DemoConfig

CORPUS_SEED = 3  # base-model pretraining corpora use other seeds (1, 2, 4), so the two never share documents
STATS_DOCS = 5000  # documents of a --data corpus measured for the length statistics


def line_tokens(tokenizer) -> int:
    """Tokens of one filler line with this tokenizer: the unit the corpus's line budgets are sized
    in, so a "long" document spans the window for the model being trained, whatever its tokenizer."""
    from training.demo_corpus import NOISE

    return max(1, len(tokenizer(NOISE + "\n", add_special_tokens=False)["input_ids"]))


def corpus_path(cfg: DemoConfig, out: Path, tokens_per_line: int) -> Path:
    """The generated corpus's file: its name holds every setting that changes its text."""
    from training.demo_corpus import LINE_TOKENS

    share = f"{cfg.long_share:g}"
    unit = "" if tokens_per_line == LINE_TOKENS else f"-lt{tokens_per_line}"
    return out / "data" / f"corpus-seed{CORPUS_SEED}-{cfg.corpus_docs}-w{cfg.window}-long{share}{unit}.jsonl"


def corpus_settings(cfg: DemoConfig, tokens_per_line: int) -> dict:
    """demo_corpus.write's keyword arguments for the demo corpus at cfg.window.

    Short documents: 1/4 to 1 window's worth of filler lines (facts documents draw their filler
    from 1 up to that budget, so half of them are far shorter). Long documents (a `long_share` of
    them): filled to 1-2 windows, the paper's upsampling of long documents in miniature. A line is
    `tokens_per_line` tokens of the model's tokenizer (25 with the demo base's)."""
    from training.demo_corpus import long_lines_for

    max_lines = max(8, cfg.window // tokens_per_line)
    kw: dict = {"max_lines": max_lines, "min_lines": max(4, max_lines // 4)}
    if cfg.long_share:
        kw.update(long_share=cfg.long_share, long_lines=long_lines_for(cfg.window, tokens_per_line))
    return kw


def _corpus(cfg: DemoConfig, out: Path) -> str:
    if cfg.data:
        return cfg.data
    from harness.models.sources import model_tokenizer
    from training import demo_corpus

    unit = line_tokens(model_tokenizer(cfg.model))
    path = corpus_path(cfg, out, unit)
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        demo_corpus.write(tmp, cfg.corpus_docs, seed=CORPUS_SEED, **corpus_settings(cfg, unit))
        tmp.replace(path)
    return str(path)


def corpus_stats(cfg: DemoConfig, data: str):
    """training.demo_corpus.LengthStats of the training documents with the model's tokenizer
    (documents as training sees them: text + EOS). A --data corpus is measured on its first
    STATS_DOCS documents; returns (stats, documents measured is the whole corpus)."""
    from harness.models.sources import model_tokenizer
    from training.data import load_documents
    from training.demo_corpus import length_stats

    tokenizer = model_tokenizer(cfg.model)
    lengths: list[int] = []
    for source in [p.strip() for p in data.split(",") if p.strip()]:
        for doc in load_documents(source, tokenizer, limit=STATS_DOCS - len(lengths)):
            lengths.append(len(doc.ids))
        if len(lengths) >= STATS_DOCS:
            break
    return length_stats(lengths, cfg.window), len(lengths) < STATS_DOCS
