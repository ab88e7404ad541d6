"""The demo's base model before pretraining: its tokenizer and its random initial weights.

    python -m training.demo_base OUT_DIR --layers 2 --hidden 128 --heads 8 --max-len 8192

The pretraining itself is the project's own `harness train` on training/demo_corpus.py documents;
scripts/pretrain_demo_base.sh runs the whole recipe and reproduces the shipped assets/demo-base
(its PROVENANCE.md has the stages, corpus hashes and scores).

Why a small tokenizer of its own: a tiny model learns to look back and copy (induction) far sooner
when every digit and letter of a key or value is one frequent token than when a 4096-word BPE cuts
numbers into a thousand rare pieces. Merges are learnt on the demo corpus's own wording (noise
sentences, instructions, questions), so prompts stay compact enough that every demo task fits at 1K
tokens, and digits are never merged (split one by one before BPE).
"""

from __future__ import annotations

import argparse
from pathlib import Path

VOCAB_SIZE = 512
TOKENIZER_SEED = 0  # corpus seed for the merges; the pretraining corpus uses other seeds


def build_tokenizer(out_dir: str | Path, vocab_size: int = VOCAB_SIZE) -> Path:
    """Byte-level BPE with BOS, single-digit pre-tokens, merges from demo-corpus text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from harness.models.embedded import SPECIALS, save_with_bos
    from training.demo_corpus import documents

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator([d["text"] for d in documents(3000, seed=TOKENIZER_SEED, max_lines=8)], trainer=trainer)
    return save_with_bos(tok, out_dir)


def build_initial_model(
    out_dir: str | Path, *, layers: int = 2, hidden: int = 128, heads: int = 8, max_len: int = 8192, seed: int = 0
) -> Path:
    """The tokenizer and a random Llama (untied embeddings) in one save_pretrained directory."""
    from harness.models.embedded import build_tiny_llama

    out_dir = Path(out_dir)
    build_tokenizer(out_dir)
    return build_tiny_llama(
        out_dir,
        out_dir,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        intermediate_size=4 * hidden,
        max_position_embeddings=max_len,
        seed=seed,
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--max-len", type=int, default=8192, help="max_position_embeddings written into the config")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    if min(a.layers, a.hidden, a.heads, a.max_len) < 1 or a.hidden % a.heads:
        p.error("--layers, --hidden, --heads and --max-len must be >= 1, and --hidden a multiple of --heads")
    out = build_initial_model(a.out, layers=a.layers, hidden=a.hidden, heads=a.heads, max_len=a.max_len, seed=a.seed)
    print(f"wrote the demo tokenizer and a random initial model to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
