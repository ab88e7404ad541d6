"""A Llama-3 tokenizer (128,256 ids) as a Hugging Face folder, built offline from Meta's own file.

    pip install --no-deps llama-models==0.3.0            # ships llama_models/llama3/tokenizer.model
    python benchmarks/llama3_tokenizer.py --out runs/llama3-tokenizer
    python benchmarks/llama3_tokenizer.py --model PATH/tokenizer.model --out DIR

No model hub is reachable here, so the Llama-3.1-8B-shaped benchmarks (benchmarks/sweep_pack.py) need
the Llama-3 vocabulary from a package: Meta's `llama-models` wheel carries Llama 3's tiktoken file
(`llama3/tokenizer.model`, sha256 82e9d319…, the file Llama 3, 3.1 and 3.2 share). Its facts, as
Meta's tokenizer.py states them: 128,000 byte-level BPE ranks, one pre-tokenizing regex, then 256
special tokens from id 128,000 (<|begin_of_text|> = BOS, <|end_of_text|> = EOS, <|eot_id|>, 244
reserved). Hugging Face's `tokenizer.json` for those models is the same BPE written as a vocabulary
and merges; this module derives both from the ranks: every split of a token into two tokens of the
vocabulary is a merge, ordered by the rank of the token it makes, and `ignore_merges` makes a
pre-token found whole in the vocabulary one id, as tiktoken does. BOS is prepended (Llama 3's
post-processor), so prompts count and run with the ids Llama-3.1-8B sees.
"""

from __future__ import annotations

import argparse
import base64
import sys
from pathlib import Path

# Meta's llama3/tokenizer.py: the pre-tokenizer and the special tokens after the 128,000 ranks.
PATTERN = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
NAMED_SPECIALS = (
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|reserved_special_token_0|>",
    "<|reserved_special_token_1|>",
    "<|finetune_right_pad_id|>",
    "<|step_id|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eom_id|>",
    "<|eot_id|>",
    "<|python_tag|>",
    "<|image|>",
)
NUM_SPECIALS = 256
VOCAB_SIZE = 128_256  # 128,000 ranks + 256 special tokens: Llama-3.1-8B's vocab_size
BOS, EOS, PAD = "<|begin_of_text|>", "<|end_of_text|>", "<|finetune_right_pad_id|>"


def special_tokens() -> list[str]:
    reserved = [f"<|reserved_special_token_{2 + i}|>" for i in range(NUM_SPECIALS - len(NAMED_SPECIALS))]
    return [*NAMED_SPECIALS, *reserved]


def read_ranks(path: Path) -> dict[bytes, int]:
    """A tiktoken BPE file: one `base64(token bytes) rank` per line."""
    ranks: dict[bytes, int] = {}
    for line in path.read_bytes().splitlines():
        if line.strip():
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def merges_of(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """Every (left, right) split of a token whose two halves are tokens, ordered by the rank of the
    token they make (ties by the halves' ranks): BPE applying these merges by priority reproduces
    rank-ordered merging."""
    found: list[tuple[int, int, int, bytes, bytes]] = []
    for token, rank in ranks.items():
        for i in range(1, len(token)):
            left, right = token[:i], token[i:]
            if left in ranks and right in ranks:
                found.append((rank, ranks[left], ranks[right], left, right))
    found.sort(key=lambda m: m[:3])
    return [(left, right) for _, _, _, left, right in found]


def default_model_file() -> Path | None:
    """llama3/tokenizer.model of an installed `llama-models` package, found without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("llama_models")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "llama3" / "tokenizer.model"
        if path.is_file():
            return path
    return None


def build(model_file: Path, out_dir: Path) -> Path:
    """Write the Hugging Face tokenizer folder (tokenizer.json, tokenizer_config.json) to out_dir."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    ranks = read_ranks(model_file)
    byte_char = bytes_to_unicode()  # byte value -> the printable character byte-level BPE writes it as

    def text(b: bytes) -> str:
        return "".join(byte_char[x] for x in b)

    vocab = {text(token): rank for token, rank in ranks.items()}
    merges = [(text(left), text(right)) for left, right in merges_of(ranks)]
    tok = Tokenizer(models.BPE(vocab, merges, fuse_unk=False, ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in special_tokens()])
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
            ),
        ]
    )
    if tok.get_vocab_size() != VOCAB_SIZE or bos_id != len(ranks):
        raise ValueError(
            f"{model_file} gave {tok.get_vocab_size()} ids (BOS {bos_id}), not Llama 3's {VOCAB_SIZE}: "
            "is it llama3/tokenizer.model?"
        )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD)
    fast.model_max_length = 131_072
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(out_dir)
    return out_dir


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, help="Llama 3's tiktoken tokenizer.model (default: llama-models')")
    ap.add_argument("--out", type=Path, required=True, help="folder to write the tokenizer to")
    args = ap.parse_args(argv)
    model_file = args.model or default_model_file()
    if model_file is None:
        sys.exit("no --model given and no llama-models package installed: pip install --no-deps llama-models==0.3.0")
    print(build(model_file, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
