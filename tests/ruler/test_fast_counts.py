"""The generators' shortcuts against the slow paths they replace.

Counter counts pieces for byte-level BPE tokenizers from its own pre-tokenization (no encode);
fwe draws its coded words in bulk from numpy's MT19937. Both must give exactly what the
tokenizer and Python's `random` give, or samples would change and lengths would be wrong.
"""

from __future__ import annotations

import random
import string

import pytest

from tasks.ruler.fitting import Counter
from tasks.ruler.fwe import _coded_words_loop, coded_words


def _random_texts(seed: int, n: int, specials: list[str]) -> list[str]:
    rng = random.Random(seed)
    alphabet = string.printable + "\x00\x1c\x1d\x1f\x7f" + "éß中🙂"
    words = ["the", " magic", "number", "1234567", "uuid-8f3e", "It's", "they're", "'ll", "\n\n", "  ", "\t"]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(0, 30)):
            r = rng.random()
            if r < 0.5:
                parts.append(rng.choice(words))
            elif r < 0.97:
                parts.append("".join(rng.choices(alphabet, k=rng.randint(1, 6))))
            else:
                parts.append(rng.choice(specials) if specials else "x")
        out.append("".join(parts))
    return out


def _exact(tok, texts):
    backend = tok.backend_tokenizer
    return [len(e.ids) for e in backend.encode_batch(texts, add_special_tokens=False)]


@pytest.mark.parametrize("which", ["bpe_tokenizer", "byte_tokenizer"])
def test_piece_counts_equal_the_tokenizer(which, request):
    tok = request.getfixturevalue(which)
    specials = [t.content for t in tok.backend_tokenizer.get_added_tokens_decoder().values()]
    texts = _random_texts(0, 3000, specials)
    counter = Counter(tok)
    # in two batches and then one by one: the cache of pre-token counts must not leak across texts
    got = counter.pieces(texts[:1500]) + counter.pieces(texts[1500:])
    assert got == _exact(tok, texts)
    fresh = Counter(tok)
    assert [fresh.pieces([t])[0] for t in texts[:200]] == _exact(tok, texts[:200])


def test_fast_path_is_taken_for_byte_level_bpe(bpe_tokenizer):
    """The test above only checks the shortcut if it runs: the embedded-style BPE uses it."""
    counter = Counter(bpe_tokenizer)
    counter.pieces(["hello world"])
    assert counter._fast, "byte-level BPE should take the pre-token shortcut"


def test_fast_path_refuses_other_pre_tokenizers(tmp_path):
    """A Llama-3-style tokenizer (Split regex then ByteLevel without its regex) is not the
    GPT-2 pattern: the probe turns the shortcut off and counts stay the tokenizer's."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"\d{1,3}| ?[A-Za-z]+|\s+|[^\sA-Za-z\d]+"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tk.decoder = decoders.ByteLevel()
    corpus = _random_texts(1, 300, [])
    tk.train_from_iterator(
        corpus, trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    )
    tok = PreTrainedTokenizerFast(tokenizer_object=tk)
    counter = Counter(tok)
    texts = _random_texts(2, 500, [])
    assert counter.pieces(texts) == _exact(tok, texts)
    assert counter._fast is False


@pytest.mark.parametrize("seed,size", [(0, 1), (1, 37), (42, 1000), (7, 20000)])
def test_bulk_coded_words_equal_the_python_loop(seed, size):
    a, b = random.Random(seed), random.Random(seed)
    a.random(), b.random()  # a stream already in use, as sample_rng's is
    assert coded_words(a, size) == _coded_words_loop(b, size)
