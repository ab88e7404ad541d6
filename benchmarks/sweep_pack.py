"""RULER samples made here on CPU, packed to travel to a GPU machine: the input of the 128K sweep
(benchmarks/gpu_check.py, section sweep).

    pip install --no-deps llama-models==0.3.0     # Llama 3's tokenizer file (benchmarks/llama3_tokenizer.py)
    python benchmarks/sweep_pack.py --out runs/sweep-128k/pack.tar.xz                  # 13 tasks x 2 at 128K
    python benchmarks/sweep_pack.py --out P --tokenizer DIR --length 1k --tasks niah_single_1,vt --samples 2

The GPU machines have no wonderwords, essays, pydantic or internet, and 15 minutes; generating 128K
samples there would spend both. So the samples are made here by the project's own generators
(tasks.generate.generate_samples, the function `harness generate` and `harness eval` call), with
the tokenizer the model will run with (by default Llama 3's 128,256 ids, built from Meta's
llama-models package), and packed with that tokenizer into one xz-compressed tar:

    manifest.json                      length, samples, seed, tokenizer, per task: max_new_tokens,
                                       version, where its data came from
    tokenizer/                         the Hugging Face tokenizer folder the samples were counted with
    samples/<task>/<length>/<key>.jsonl   the sample cache of tasks.generate, as `--cache-dir` writes it

qa_1/qa_2 read SQuAD v2 dev and HotpotQA dev, which cannot be fetched offline: without --squad and
--hotpotqa they get stand-in files with the real dev sets' shapes (benchmarks/ruler_generate.py's
write_synthetic_qa: ~1,200 SQuAD paragraphs of 120 words, 7,400 HotpotQA questions of 10 paragraphs),
random words in RULER's qa template; the manifest says "stand-in". For timing this is the same work:
the prompt fills the same 128K tokens and generates the same 32.

Reading a pack (`read_pack`) needs json and tarfile alone: no task code, which needs packages the
GPU image lacks.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORMAT = 1
DEFAULT_OUT = ROOT / "runs" / "sweep-128k" / "pack.tar.xz"


@dataclass
class Pack:
    """An unpacked pack: its manifest, tokenizer folder and, per task in manifest order, the samples
    as Sample.to_dict() rows sorted by index."""

    manifest: dict
    tokenizer_dir: Path
    samples: dict[str, list[dict]]

    @property
    def length(self) -> int:
        return int(self.manifest["length"])


def _git_commit() -> str | None:
    import subprocess

    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


def prepare(
    out: Path,
    tokenizer_dir: Path,
    length: int,
    samples: int,
    task_names: list[str],
    seed: int = 42,
    squad: str | None = None,
    hotpotqa: str | None = None,
    log=print,
) -> Path:
    """Generate `samples` samples of each task at `length` with the tokenizer of `tokenizer_dir` and
    write the pack to `out` (an .tar.xz, written beside it and renamed into place)."""
    import time

    from harness.models.sources import model_tokenizer
    from harness.models.tokenization import tokenizer_fingerprint
    from tasks.generate import generate_samples
    from tasks.registry import get_task

    qa_data = {"qa_1": "real" if squad else "stand-in", "qa_2": "real" if hotpotqa else "stand-in"}
    stand_ins: Path | None = None  # the folder of the stand-in files, removed at the end
    if any(n in qa_data for n in task_names) and not (squad and hotpotqa):
        from ruler_generate import write_synthetic_qa

        fake_squad, fake_hotpot = write_synthetic_qa()
        stand_ins = Path(fake_squad).parent
        squad, hotpotqa = squad or fake_squad, hotpotqa or fake_hotpot
    saved = {k: os.environ.get(k) for k in ("HARNESS_SQUAD", "HARNESS_HOTPOTQA")}
    if squad:
        os.environ["HARNESS_SQUAD"] = str(Path(squad).resolve())
    if hotpotqa:
        os.environ["HARNESS_HOTPOTQA"] = str(Path(hotpotqa).resolve())
    try:
        tok = model_tokenizer(str(tokenizer_dir), light=True)  # as `harness generate --tokenizer DIR`
        manifest: dict = {
            "format": FORMAT,
            "length": length,
            "samples": samples,
            "seed": seed,
            "tokenizer": {"fingerprint": tokenizer_fingerprint(tok), "ids": len(tok.backend_tokenizer.get_vocab())},
            "commit": _git_commit(),
            "tasks": {},
        }
        with tempfile.TemporaryDirectory(prefix="sweep-pack-") as tmp:
            cache = Path(tmp) / "samples"
            for name in task_names:
                task = get_task(name)
                t0 = time.perf_counter()
                made = generate_samples(task, length, range(samples), tok, seed=seed, cache_dir=cache)
                manifest["tasks"][name] = {
                    "max_new_tokens": task.max_new_tokens,
                    "version": task.version,
                    "data": qa_data.get(name, "real"),
                    "prompt_tokens": [s.num_tokens for s in made],
                }
                log(
                    f"{name}: {samples} samples at {length} in {time.perf_counter() - t0:.1f} s, "
                    f"prompt tokens {[s.num_tokens for s in made]}"
                )
            out.parent.mkdir(parents=True, exist_ok=True)
            part = out.with_name(out.name + f".tmp{os.getpid()}")
            try:
                with tarfile.open(part, "w:xz", preset=9) as tar:
                    info = tarfile.TarInfo("manifest.json")
                    data = json.dumps(manifest, indent=1).encode()  # tasks in the order given
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
                    for f in sorted(Path(tokenizer_dir).iterdir()):
                        if f.is_file():
                            tar.add(f, arcname=f"tokenizer/{f.name}")
                    tar.add(cache, arcname="samples")
                os.replace(part, out)
            finally:
                part.unlink(missing_ok=True)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if stand_ins is not None:
            shutil.rmtree(stand_ins, ignore_errors=True)
    return out


def read_pack(path: Path, into: Path, tasks: list[str] | None = None, per_task: int | None = None) -> Pack:
    """Unpack `path` into the folder `into` and read its samples (the first `per_task` of each task,
    `tasks` in manifest order when given)."""
    with tarfile.open(path, "r:xz") as tar:
        tar.extractall(into, filter="data")  # plain files under `into` only
    manifest = json.loads((into / "manifest.json").read_text())
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{path}: pack format {manifest.get('format')!r}, this reader knows {FORMAT}")
    length = int(manifest["length"])
    names = [n for n in manifest["tasks"] if tasks is None or n in tasks]
    out: dict[str, list[dict]] = {}
    for name in names:
        rows = []
        for f in sorted((into / "samples" / name / str(length)).glob("*.jsonl")):
            rows += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        rows.sort(key=lambda r: r["index"])
        out[name] = rows[:per_task] if per_task else rows
    return Pack(manifest, into / "tokenizer", out)


def main(argv=None) -> int:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from harness.core.lengths import parse_lengths
    from tasks.registry import split_csv
    from tasks.ruler import RULER_TASKS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"the pack to write (default {DEFAULT_OUT})")
    ap.add_argument(
        "--tokenizer", type=Path, help="tokenizer folder (default: Llama 3's, built from the llama-models package)"
    )
    ap.add_argument("--length", default="128k", help="one length (default 128k = 131072 tokens)")
    ap.add_argument("--samples", type=int, default=2, help="samples per task (default 2)")
    ap.add_argument("--tasks", help="comma list (default: RULER's 13)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--squad", help="SQuAD v2 dev-v2.0.json (default: a stand-in of its shape)")
    ap.add_argument("--hotpotqa", help="hotpot_dev_distractor_v1.json (default: a stand-in of its shape)")
    args = ap.parse_args(argv)
    (length,) = parse_lengths(args.length)
    names = split_csv(args.tasks) or list(RULER_TASKS)
    with tempfile.TemporaryDirectory(prefix="llama3-tok-") as tmp:
        tokenizer = args.tokenizer
        if tokenizer is None:
            import llama3_tokenizer

            model_file = llama3_tokenizer.default_model_file()
            if model_file is None:
                sys.exit("no --tokenizer and no llama-models package: pip install --no-deps llama-models==0.3.0")
            tokenizer = llama3_tokenizer.build(model_file, Path(tmp) / "tokenizer")
        out = prepare(args.out, tokenizer, length, args.samples, names, args.seed, args.squad, args.hotpotqa)
    print(f"{out}: {out.stat().st_size / 2**20:.2f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
