"""What benchmarks/helmet_parity.py patches inside HELMET's process so that its data.py runs on local
rows: the hub datasets it loads, the Llama-2 tokenizer it downloads, and the demo draw it leaves
unseeded. Nothing of HELMET's code is changed; these names are replaced before its loaders run:

  datasets.load_dataset, data.load_dataset
        a name in `hub` (CogComp/trec, narrativeqa, allenai/multi_lexsum,
        xinrongzhang2022/infinitebench) returns a DatasetDict built from local rows; any other
        name (the released files: datasets' "json" loader) goes to datasets' own function.
        Both are replaced: data.py imports load_dataset at its top, load_infbench inside itself.
  data.AutoTokenizer
        from_pretrained("meta-llama/Llama-2-7b-hf") loads the stand-in tokenizer folder instead
        (data.truncate_llama2, data.filter_length and load_narrativeqa's length filter).
  datasets.Dataset.map
        num_proc is dropped (HELMET asks for 16 and 32 workers; the rows are the same in process),
        and a non-batched map records the example it is calling its function on.
  datasets.Dataset.shuffle
        a call with neither seed nor generator (load_narrativeqa's and load_multi_lexsum's demo
        draw, a different draw on every run of HELMET) is seeded the way ours is:
        tasks.helmet.draws.question_seed of the example being mapped (NarrativeQA: its question's
        text; Multi-LexSum: its id). The seeded shuffles (items, InfiniteBench's demos) are HELMET's;
        an unseeded one anywhere else stops the run.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

LLAMA2_HUB = "meta-llama/Llama-2-7b-hf"

_mapping: list = []  # the examples non-batched maps are calling their functions on, innermost last
_demo_key: list[Callable[[dict], str]] = []  # how the current loader's demo draw is seeded


@contextmanager
def seeded_demos(key: Callable[[dict], str]):
    """Inside: an unseeded Dataset.shuffle() is seeded by question_seed(key(example being mapped))."""
    _demo_key.append(key)
    try:
        yield
    finally:
        _demo_key.pop()


def _seed_for_unseeded_shuffle() -> int:
    from tasks.helmet.draws import question_seed

    if not _demo_key or not _mapping:
        raise RuntimeError("HELMET shuffled without a seed outside a demo draw the parity script knows of")
    return question_seed(_demo_key[-1](_mapping[-1]))


class _StandInAutoTokenizer:
    """data.AutoTokenizer: Llama-2's name loads the stand-in folder; no other name is expected."""

    def __init__(self, folder: Path):
        self.folder = folder

    def from_pretrained(self, name: str, *args, **kwargs):
        from transformers import AutoTokenizer

        if name != LLAMA2_HUB:
            raise RuntimeError(f"HELMET's data.py asked for the tokenizer {name}")
        return AutoTokenizer.from_pretrained(str(self.folder))


def serve(hdata, hub: dict[str, Callable[..., dict]], llama2: Path | None = None) -> None:
    """Install the replacements above in this process (HELMET's data module `hdata`)."""
    import datasets

    local_load = datasets.load_dataset

    def load_dataset(path, *args, **kwargs):  # datasets' signature: the configuration is `name`
        if path in hub:
            return hub[path](*args, **kwargs)
        return local_load(path, *args, **kwargs)

    datasets.load_dataset = load_dataset
    hdata.load_dataset = load_dataset
    if llama2 is not None:
        hdata.AutoTokenizer = _StandInAutoTokenizer(llama2)

    dataset_map = datasets.Dataset.map
    dataset_shuffle = datasets.Dataset.shuffle

    def map_in_process(self, function=None, *args, **kwargs):
        kwargs.pop("num_proc", None)
        if function is not None and not args and not kwargs.get("batched") and kwargs.get("input_columns") is None:
            inner = function

            def function(example, *more, **kw):
                _mapping.append(example)
                try:
                    return inner(example, *more, **kw)
                finally:
                    _mapping.pop()

        return dataset_map(self, function, *args, **kwargs)

    def shuffle(self, seed=None, generator=None, *args, **kwargs):
        if seed is None and generator is None:
            seed = _seed_for_unseeded_shuffle()
        return dataset_shuffle(self, seed, generator, *args, **kwargs)

    datasets.Dataset.map = map_in_process
    datasets.Dataset.shuffle = shuffle


# ----------------------------------------------------------------------------------------------
# The hub datasets, from local rows


def trec_hub(icl_folder: Path) -> Callable[..., dict]:
    """CogComp/trec from tasks.icl's layout (trec_coarse only): the hub's column names and
    ClassLabel feature."""
    import json

    import datasets

    labels = json.loads((icl_folder / "trec_coarse/labels.json").read_text())
    feats = datasets.Features({"text": datasets.Value("string"), "coarse_label": datasets.ClassLabel(names=labels)})

    def split(name: str):
        rows = [json.loads(x) for x in (icl_folder / f"trec_coarse/{name}.jsonl").read_text().splitlines()]
        cols = {"text": [r["text"] for r in rows], "coarse_label": [r["label"] for r in rows]}
        return datasets.Dataset.from_dict(cols, features=feats)

    return lambda **kwargs: {"train": split("train"), "test": split("test")}


def rows_hub(splits: dict[str, list[dict]], config: str | None = None) -> Callable[..., dict]:
    """A hub dataset whose splits are `splits` (rows as the hub holds them): a DatasetDict, typed
    by the `features` the caller passes (load_infbench's) or inferred from the rows; `config` is
    the configuration name the caller must ask for (load_multi_lexsum's v20230518)."""
    import datasets

    def load(name=None, features=None, **kwargs):
        if config is not None and name != config:
            raise RuntimeError(f"HELMET asked for configuration {name}, the fixture holds {config}")
        return datasets.DatasetDict(
            {split: datasets.Dataset.from_list(rows, features=features) for split, rows in splits.items()}
        )

    return load
