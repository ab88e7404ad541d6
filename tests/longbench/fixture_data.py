"""The LongBench v1 parity fixture: tests/longbench/fixtures/data/<task>.jsonl in the layout of the hub's
data.zip (one JSON object per line: input, context, answers, length, dataset, language, all_classes, _id),
and the predictions both metric codes score.

    python -m tests.longbench.fixture_data          # rewrites the files (deterministic)

Each task has a short item (not cut at most budgets), a middle one (cut at small budgets) and, for
a few tasks, a long one (over 3,500 tokens of the test tokenizer, cut at pred.py's 4K budget).
Contexts mix what moves a middle cut: English words, digits and punctuation, newlines, Chinese
characters (byte-level BPE splits them, so a cut can fall inside one) and code.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

FOLDER = Path(__file__).resolve().parent / "fixtures" / "data"
LONG = {"narrativeqa", "gov_report", "trec", "lsht", "lcc"}  # these get a third, long item
_WORDS = [
    "river",
    "stone",
    "cloud",
    "lamp",
    "harbor",
    "violet",
    "engine",
    "meadow",
    "signal",
    "copper",
    "quiet",
    "ladder",
]
_ZH = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严"


def _english(rng: random.Random, n: int) -> str:
    out = []
    for k in range(n):
        w = rng.choice(_WORDS)
        if k % 11 == 5:
            w = str(rng.randrange(10 ** rng.randint(1, 6)))
        out.append(w + rng.choice(["", "", "", ",", ".", ".\n", "\n\n", "!", "?"]))
    return " ".join(out)


def _chinese(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_ZH) + ("。\n" if k % 23 == 22 else "，" if k % 7 == 6 else "") for k in range(n))


def _code(rng: random.Random, n: int) -> str:
    lines = []
    for k in range(n):
        name = rng.choice(_WORDS)
        lines.append(
            rng.choice([f"def {name}_{k}(x):", f"    return x + {k}", f"{name} = [{k}, {k + 1}]", "# " + name])
        )
    return "\n".join(lines) + "\n"


def _context(task: str, rng: random.Random, n: int) -> str:
    if task in {"lcc", "repobench-p"}:
        return _code(rng, n // 3)
    if task in {"multifieldqa_zh", "dureader", "vcsum", "lsht", "passage_retrieval_zh"}:
        return _chinese(rng, n)
    if task.startswith("passage_retrieval") or task == "passage_count":
        return "\n\n".join(f"Paragraph {i + 1}: {_english(rng, n // 6)}" for i in range(6))
    return _english(rng, n)


ANSWERS = {
    "trec": (["Location", "Number", "Description"], ["Location", "Number", "Description", "Other location"]),
    "lsht": (["体育", "财经", "科技"], ["体育", "财经", "科技", "娱乐"]),
    "passage_count": (["3", "5", "4"], None),
    "passage_retrieval_en": (["Paragraph 2", "Paragraph 5", "Paragraph 1"], None),
    "passage_retrieval_zh": (["段落2", "段落5", "段落1"], None),
}


def records(task: str) -> list[dict]:
    from tasks.longbench.prompts import CHINESE

    rng = random.Random(f"longbench-parity-{task}")
    sizes = [60, 300] + ([1400] if task in LONG else [])
    out = []
    for i, n in enumerate(sizes):
        answers, classes = ANSWERS.get(task, (None, None))
        if answers is None:
            answer = [_chinese(rng, 6) if task in CHINESE else _english(rng, 4).replace("\n", " ")]
        else:
            answer = [answers[i % len(answers)]]
        question = _chinese(rng, 12) + "？" if task in CHINESE else _english(rng, 10).replace("\n", " ") + "?"
        if task in {"lcc", "repobench-p"}:
            question = _code(rng, 3) if task == "repobench-p" else ""
        out.append(
            {
                "input": question,
                "context": _context(task, rng, n),
                "answers": answer,
                "length": n,
                "dataset": task,
                "language": "zh" if task in CHINESE else "code" if task in {"lcc", "repobench-p"} else "en",
                "all_classes": classes,
                "_id": f"{task}-fixture-{i}",
            }
        )
    return out


def predictions(record: dict) -> list[str]:
    """What both metric codes score for a record: the answer, variants eval.py's cuts and
    normalisations treat differently, a wrong answer and nothing."""
    gold = record["answers"][0]
    return [
        gold,
        f"{gold}\nsecond line {gold}",
        f"\n\n{gold.upper()} , the end.",
        "The answer is " + gold[: max(1, len(gold) // 2)],
        "说明：" + gold,
        "x = 1  # " + gold,
        "",
    ]


def write(folder: Path = FOLDER) -> None:
    from tasks.longbench.prompts import DATASETS

    folder.mkdir(parents=True, exist_ok=True)
    for task in DATASETS:
        with open(folder / f"{task}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records(task))


if __name__ == "__main__":
    write()
