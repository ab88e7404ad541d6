"""RULER needle-in-a-haystack tasks (niah_single_1/2/3, niah_multikey_1/2/3, niah_multivalue,
niah_multiquery). Paper: RULER (Hsieh et al., 2024); reference NVIDIA/RULER
scripts/data/synthetic/niah.py with scripts/synthetic.yaml. Metric: string_match_all.

Haystacks: "noise" (the grass-is-green line repeated, needles at random line positions),
"essay" (Paul Graham essays, needles between sentences at depths drawn from 40 evenly spaced
values), "needle" (distractor needles with random keys and values). Units for length fitting:
one noise line, one essay word, one distractor needle.

    harness generate --tasks niah_single_1 --lengths 4k --samples 10 --out data/
"""

from __future__ import annotations

import hashlib
import io
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.core.errors import UserError
from tasks.data import essays as essays_mod
from tasks.data.words import adjectives, nouns, random_pair, words_hash
from tasks.ruler import templates as T
from tasks.ruler.common import RulerTask
from tasks.ruler.fitting import Counter, sample_rng

# np.round(np.linspace(0, 100, num=40, endpoint=True)).astype(int), as the reference.
DEPTHS = [int(d) for d in np.round(np.linspace(0, 100, num=40, endpoint=True)).astype(int)]


def random_value(kind: str, rng) -> str:
    if kind == "numbers":  # 7 digits: randint(10**6, 10**7 - 1)
        return str(rng.randint(10**6, 10**7 - 1))
    if kind == "words":
        return random_pair(rng)
    if kind == "uuids":
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))
    raise AssertionError(kind)


DISTRACTOR_BLOCK = 256


def draw_values(kind: str, g: np.random.Generator, size: int) -> list[str]:
    """`size` values at once, with the same distributions as random_value."""
    if kind == "numbers":
        return [str(v) for v in g.integers(10**6, 10**7, size=size)]
    if kind == "words":
        adj, noun = adjectives(), nouns()
        return [
            f"{adj[i // len(noun)]}-{noun[i % len(noun)]}"
            for i in g.integers(0, len(adj) * len(noun), size=size).tolist()
        ]
    if kind == "uuids":  # random 128 bits with the v4 version and variant bits, as uuid.UUID(version=4)
        raw = np.frombuffer(g.bytes(16 * size), dtype=np.uint8).reshape(size, 16).copy()
        raw[:, 6] = (raw[:, 6] & 0x0F) | 0x40
        raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80
        out = []
        for row in raw:
            h = row.tobytes().hex()
            out.append(f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
        return out
    raise AssertionError(kind)


@dataclass
class NiahConfig:
    haystack: str  # noise | essay | needle
    type_k: str
    type_v: str
    num_k: int = 1
    num_v: int = 1
    num_q: int = 1


def _noise_line_cost(counter: Counter) -> int:
    key = "noise_line"
    if key not in counter.tables:
        three = "\n".join([T.NOISE] * 3)
        two = "\n".join([T.NOISE] * 2)
        a, b = counter.pieces([three, two])
        counter.tables[key] = a - b
    return counter.tables[key]


class EssayCosts:
    """Tokens of the first k corpus words joined with spaces, for any k, built chunk by chunk.

    A chunk is tokenized once per tokenizer (with the space that precedes it in the haystack) and
    its word boundaries are read from the token offsets; a 4K sample touches one chunk, a 128K
    sample about half the corpus.
    """

    CHUNK = 8192

    def __init__(self, counter: Counter, words: list[str], corpus_hash: str):
        self.counter, self.words = counter, words
        self.W = len(words)
        self.cum = np.zeros(1, dtype=np.int64)  # cum[k] for k <= covered words
        self.path: Path | None = None
        cache = os.environ.get("HARNESS_CACHE", str(Path.home() / ".cache" / "longctx-harness"))
        if cache:  # persisted per (tokenizer, corpus) so a new process starts warm
            tok = hashlib.sha256(counter.backend.to_str().encode()).hexdigest()[:16]
            self.path = Path(cache) / "essay_costs" / f"{tok}-{corpus_hash}.npy"
            try:
                from harness.core.paths import read_regular

                loaded = np.load(io.BytesIO(read_regular(self.path)))  # not a regular file: ignored
                if loaded.ndim == 1 and loaded[0] == 0 and len(loaded) <= self.W + 1:
                    self.cum = loaded.astype(np.int64)
            except (OSError, ValueError):
                pass

    def _cover(self, k: int) -> None:
        if len(self.cum) - 1 >= k:
            return
        while len(self.cum) - 1 < k:
            a = len(self.cum) - 1
            chunk = self.words[a : a + self.CHUNK]
            lead = 1 if a else 0
            text = " " * lead + " ".join(chunk)
            enc = self.counter.backend.encode(text, add_special_tokens=False)
            starts = np.fromiter((o[0] for o in enc.offsets), dtype=np.int64, count=len(enc.offsets))
            lens = np.fromiter((len(w) for w in chunk), dtype=np.int64, count=len(chunk))
            ends = lead + np.cumsum(lens + 1) - 1  # char offset just past each word
            local = np.searchsorted(starts, ends, side="left")
            local[-1] = len(enc.ids)
            self.cum = np.concatenate([self.cum, self.cum[-1] + local])
        if self.path is not None:
            self._save()

    def _save(self) -> None:
        from harness.core.atomic import atomic_write

        assert self.path is not None
        buf = io.BytesIO()
        np.save(buf, self.cum)
        try:  # atomic: concurrent processes never read a torn file; a killed one's temp is cleaned later
            atomic_write(self.path, buf.getvalue())
        except UserError:
            pass  # a read-only or full cache only costs speed

    def __call__(self, n: np.ndarray) -> np.ndarray:
        """tokens(first n words of the repeated corpus), up to the junctions between copies."""
        full, rest = n // self.W, n % self.W
        self._cover(self.W if full.max() > 0 else int(rest.max()))
        return full * (self.cum[self.W] if full.max() > 0 else 0) + self.cum[rest]

    def mean(self) -> float:
        self._cover(min(self.W, self.CHUNK))
        return self.cum[-1] / (len(self.cum) - 1)


def _essay_costs(counter: Counter, essays) -> EssayCosts:
    key = ("essay_costs", essays.hash)
    if key not in counter.tables:
        counter.tables[key] = EssayCosts(counter, essays.words, essays.hash)
    return counter.tables[key]


class NiahPlan:
    def __init__(self, cfg: NiahConfig, parts: tuple, counter: Counter, essays=None):
        self.cfg, self.parts, self.counter, self.essays = cfg, parts, counter, essays
        rng = sample_rng(*parts)
        num_k = max(cfg.num_k, cfg.num_q)
        keys, values, needles = [], [], []
        for _ in range(num_k):
            keys.append(random_value(cfg.type_k, rng))
            vals = []
            for _ in range(cfg.num_v):
                vals.append(random_value(cfg.type_v, rng))
                needles.append(T.NEEDLE.format(type_needle_v=cfg.type_v, key=keys[-1], value=vals[-1]))
            values.append(vals)
        rng.shuffle(needles)
        self.needles = needles
        self.keys = set(keys)
        picked = rng.sample(range(num_k), cfg.num_q)
        queries = [keys[i] for i in picked]
        self.references = [a for i in picked for a in values[i]]
        # Which needle holds each reference (depth metadata only: nothing here draws from rng).
        text_of = {
            (keys[i], v): T.NEEDLE.format(type_needle_v=cfg.type_v, key=keys[i], value=v)
            for i in picked
            for v in values[i]
        }
        self.answer_needles = [needles.index(text_of[(keys[i], v)]) for i in picked for v in values[i]]
        self.query = ", ".join(queries[:-1]) + ", and " + queries[-1] if len(queries) > 1 else queries[0]
        template, prefix, type_v = T.NIAH_TEMPLATE, T.NIAH_ANSWER_PREFIX, cfg.type_v
        if cfg.num_q * cfg.num_v == 1:
            template, prefix, type_v = T.niah_singular(template), T.niah_singular(prefix), type_v[:-1]
        self.template = template.replace("{type_needle_v}", type_v).replace("{query}", self.query)
        self.prefix = prefix.format(type_needle_v=type_v, query=self.query)
        self.depths = rng.sample(DEPTHS, len(needles)) if cfg.haystack == "essay" else None
        self.max_units = None
        if cfg.haystack == "essay":
            self.min_units = 1
            self.cum = _essay_costs(counter, essays)
        elif cfg.haystack == "noise":
            self.min_units = len(needles)
            self.line = _noise_line_cost(counter)
        else:
            self.min_units = len(needles)
            self._blocks = 0
            self.distractors: list[str] = []
            self._dcum = np.zeros(1, dtype=np.int64)
            self._dbase: int | None = None

    # -- rendering ---------------------------------------------------------------------------
    def _line_positions(self, n: int) -> list[int]:
        """The haystack line each needle (in self.needles order) is inserted before."""
        r = sample_rng(*self.parts, "positions", n)
        return sorted(r.sample(range(n), len(self.needles)), reverse=True)

    def _lines(self, n: int, base: list[str]) -> str:
        lines = list(base)
        for index, element in zip(self._line_positions(n), self.needles):
            lines.insert(index, element)
        return "\n".join(lines)

    def _essay_layout(self, n: int) -> tuple[list[str], list[int], list[int]]:
        """(words, sentence starts up to n, [0] + the needles' sentence cut points + [num_sents])."""
        words, starts = self.essays.words, self.essays.starts
        W = len(words)
        if n > W:
            reps = -(-n // W)
            words = words * reps
            starts = [c * W + s for c in range(reps) for s in starts]
        starts = starts[: int(np.searchsorted(starts, n, side="left"))] + [n]
        num_sents = len(starts) - 1
        assert self.depths is not None  # set for essay haystacks, the only ones with an essay
        pos = [0] + sorted(int(num_sents * (d / 100)) for d in self.depths) + [num_sents]
        return words, starts, pos

    def _essay(self, n: int) -> str:
        words, starts, pos = self._essay_layout(n)
        parts = []
        for i in range(1, len(pos)):
            parts.append(" ".join(words[starts[pos[i - 1]] : starts[pos[i]]]))
            if i - 1 < len(self.needles):
                parts.append(self.needles[i - 1])
        return " ".join(parts)

    def render(self, n: int) -> tuple[str, str]:
        h = self.cfg.haystack
        if h == "essay":
            context = self._essay(n)
        elif h == "noise":
            context = self._lines(n, [T.NOISE] * n)
        else:
            self._extend(n)
            context = self._lines(n, self.distractors[:n])
        return self.template.replace("{context}", context, 1), self.prefix

    # -- token model ---------------------------------------------------------------------------
    def _block(self, b: int) -> list[tuple[str, str, str]]:
        """(needle, " key", " value") for distractor block b: DISTRACTOR_BLOCK draws from a
        generator of their own, so the stream is the same however far a sample reads into it."""
        g = np.random.default_rng(sample_rng(*self.parts, "distractors", b).getrandbits(64))
        keys = draw_values(self.cfg.type_k, g, DISTRACTOR_BLOCK)
        values = draw_values(self.cfg.type_v, g, DISTRACTOR_BLOCK)
        return [
            (T.NEEDLE.format(type_needle_v=self.cfg.type_v, key=k, value=v), " " + k, " " + v)
            for k, v in zip(keys, values)
            if k not in self.keys
        ]  # a distractor never answers the query

    def _extend(self, n: int) -> None:
        """Draw distractor needles up to n (a fixed stream) and their token costs."""
        if len(self.distractors) >= n:
            return
        block: list[tuple[str, str, str]] = []  # the blocks this call needs, costed in one batch
        while len(self.distractors) + len(block) < n:
            block += self._block(self._blocks)
            self._blocks += 1
        pieces = [p for _, k, v in block for p in (k, v)]
        costs = np.asarray(self.counter.pieces(pieces), dtype=np.int64).reshape(-1, 2).sum(axis=1)
        if self._dbase is None:
            # tokens of "\n<needle>" in context beyond its key and value pieces
            whole, noise_alone = self.counter.pieces(["\n".join([T.NOISE, block[0][0]]), T.NOISE])
            self._dbase = whole - noise_alone - int(costs[0])
        self.distractors += [needle for needle, _, _ in block]
        self._dcum = np.concatenate([self._dcum, self._dcum[-1] + np.cumsum(costs + self._dbase)])

    def guess(self, tokens_left: float) -> int:
        if self.cfg.haystack == "needle":
            self._extend(64)
            mean = self._dcum[-1] / (len(self._dcum) - 1)
            return int(self.min_units + tokens_left / mean * 1.01) + 8
        if self.cfg.haystack == "noise":
            return int(self.min_units + tokens_left / self.line) + 1
        return int(tokens_left / self.cum.mean()) + 1

    def calibration_units(self, hint: int) -> int:
        """Essays: ~2000 words (about 100 sentences, so the needles sit apart as in a long haystack)."""
        return min(2000, int(hint * 0.9)) if self.cfg.haystack == "essay" else self.min_units

    def model(self, n: np.ndarray) -> np.ndarray:
        h = self.cfg.haystack
        if h == "noise":
            return n * self.line
        if h == "essay":
            return self.cum(n)
        self._extend(int(n.max()))
        return self._dcum[n]

    def needle_depths(self, n: int) -> list[float]:
        """Depth of each needle (self.needles order), 0-100: the share of the haystack's units
        (lines, or essay words) before it, as rendered at n units."""
        if self.cfg.haystack == "essay":
            _, starts, pos = self._essay_layout(n)
            before = [starts[p] for p in pos[1:-1]]
        else:
            before = self._line_positions(n)
        return [round(100.0 * b / n, 2) if n else 0.0 for b in before]

    def metadata(self, n: int) -> dict:
        depths = self.needle_depths(n)
        return {
            "haystack": self.cfg.haystack,
            "needle_depths": depths,
            # aligned with the references: the depth of the needle that holds each answer
            "answer_depths": [depths[i] for i in self.answer_needles],
        }


class NiahTask(RulerTask):
    metric = "string_match_all"
    max_new_tokens = T.NIAH_TOKENS
    config: NiahConfig

    def __init__(self, essays_path: str | None = None):
        self.essays_path = essays_path

    def _essays(self):
        return essays_mod.load_essays(self.essays_path) if self.config.haystack == "essay" else None

    def check_available(self) -> None:
        self._essays()

    def dataset_hash(self) -> str:
        e = self._essays()
        return f"words:{words_hash()}" + (f";essays:{e.hash}" if e else "")

    def plan(self, length, parts, counter, index):
        return NiahPlan(self.config, parts, counter, self._essays())


def _make(name: str, cfg: NiahConfig) -> type[NiahTask]:
    return type(f"Niah_{name}", (NiahTask,), {"name": name, "config": cfg, "__doc__": f"RULER {name}."})


NIAH_TASKS = [
    _make("niah_single_1", NiahConfig("noise", "words", "numbers")),
    _make("niah_single_2", NiahConfig("essay", "words", "numbers")),
    _make("niah_single_3", NiahConfig("essay", "words", "uuids")),
    _make("niah_multikey_1", NiahConfig("essay", "words", "numbers", num_k=4)),
    _make("niah_multikey_2", NiahConfig("needle", "words", "numbers")),
    _make("niah_multikey_3", NiahConfig("needle", "uuids", "uuids")),
    _make("niah_multivalue", NiahConfig("essay", "words", "numbers", num_v=4)),
    _make("niah_multiquery", NiahConfig("essay", "words", "numbers", num_q=4)),
]

__all__ = ["DEPTHS", "NIAH_TASKS", "NiahConfig", "NiahTask"]
