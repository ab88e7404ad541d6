"""A sample is a function of (task, version, length, index, seed, tokenizer): order, subsets and
other processes give identical bytes."""

import json
import subprocess
import sys

from tasks.generate import generate_samples
from tasks.registry import get_task

TASKS = ["niah_single_2", "niah_multikey_2", "vt", "cwe", "fwe"]


def test_order_and_subset_independent(bpe_tokenizer):
    for name in TASKS:
        task = get_task(name)
        forward = [task.sample(2048, i, 42, bpe_tokenizer).to_json() for i in range(3)]
        other = get_task("niah_single_1").sample(2048, 0, 42, bpe_tokenizer)  # interleave another task
        assert other.task == "niah_single_1"
        backward = [get_task(name).sample(2048, i, 42, bpe_tokenizer).to_json() for i in (2, 1, 0)][::-1]
        assert forward == backward
        assert len(set(forward)) == 3  # different indices differ
        assert task.sample(2048, 0, 43, bpe_tokenizer).to_json() != forward[0]  # the seed matters


def test_cache_round_trip(bpe_tokenizer, tmp_path):
    task = get_task("fwe")
    fresh = generate_samples(task, 1024, [0, 1], bpe_tokenizer, cache_dir=tmp_path)
    cached = generate_samples(task, 1024, [1, 0, 2], bpe_tokenizer, cache_dir=tmp_path)
    assert [s.to_json() for s in fresh] == [cached[1].to_json(), cached[0].to_json()]


def test_identical_across_processes(bpe_tokenizer, bpe_tokenizer_dir):
    code = (
        "import sys, json\n"
        "from tasks.ruler.fitting import light_tokenizer\n"  # counts like transformers (tested), starts faster
        "from tasks.registry import get_task\n"
        f"tok = light_tokenizer({str(bpe_tokenizer_dir)!r})\n"
        f"print(json.dumps([get_task(n).sample(2048, 1, 42, tok).to_json() for n in {TASKS!r}]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**__import__("os").environ, "PYTHONHASHSEED": "123"},
    ).stdout
    theirs = json.loads(out.strip().splitlines()[-1])
    ours = [get_task(n).sample(2048, 1, 42, bpe_tokenizer).to_json() for n in TASKS]
    assert theirs == ours
