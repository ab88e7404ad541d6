"""The prompt the model is given is not the one meant (docs/failure-modes.md): a chat template that
drops a turn, a second BOS, a template that makes an instruct model end at once. `harness doctor`
names each with a FAIL line; eval stops where a turn would be dropped, and marks empty cells."""

from __future__ import annotations

import json

from .conftest import records
from .models import CHAT, copy_model, with_chat_template

NIAH = ["--tasks", "niah_single_1", "--lengths", "1k"]
# SUS-Chat's published template (SUSTech-IDEA/SUS-Chat issue 3), as Jinja: user and assistant turns
# only, so a system turn is left out without a word.
NO_SYSTEM = (
    "{% for m in messages %}{% if m['role'] == 'user' %}### Human: {{ m['content'] }}\n\n### Assistant: "
    "{% elif m['role'] == 'assistant' %}{{ m['content'] }}{% endif %}{% endfor %}"
)


def test_chat_template_that_drops_the_system_turn(tiny_llama_dir, run, tmp_path):
    """SUSTech-IDEA/SUS-Chat issue 3: the model's template renders user and assistant turns only; a
    system prompt vanishes in silence. The doctor renders the run's turns and finds it missing; eval
    stops before any sample."""
    m = with_chat_template(copy_model(tiny_llama_dir, tmp_path / "m"), NO_SYSTEM)
    out = tmp_path / "out"
    flags = ["--ckpts", str(m), "--chat", "--system-prompt", "Answer with the number alone.", *NIAH]
    doctor = run("doctor", *flags, "--canaries", "0")
    ev = run("eval", *flags, "--samples", "1", "--out", str(out))
    ok = run("doctor", "--ckpts", str(m), "--chat", *NIAH, "--canaries", "0")  # no system turn asked: fine
    assert doctor.code == 1 and doctor.failed("chat turns", "system turn")
    assert ev.code == 2 and "system turn" in ev.last_error and not records(out)
    assert ok.lines["chat turns"].startswith("PASS")


def test_chat_template_that_drops_the_user_turn(tiny_llama_dir, run, tmp_path):
    """The same failure for the task input itself: a template that writes only the system turn (the
    haystack never reaches the model)."""
    only_system = "{% for m in messages %}{% if m['role'] == 'system' %}{{ m['content'] }}{% endif %}{% endfor %}"
    m = with_chat_template(copy_model(tiny_llama_dir, tmp_path / "m"), only_system)
    out = tmp_path / "out"
    doctor = run("doctor", "--ckpts", str(m), "--chat", *NIAH, "--canaries", "0")
    ev = run("eval", "--ckpts", str(m), "--chat", *NIAH, "--samples", "1", "--out", str(out))
    assert doctor.code == 1 and doctor.failed("chat turns", "user turn")
    assert ev.code == 2 and "user turn" in ev.last_error and not records(out)


def test_second_bos(tiny_llama_dir, run, tmp_path, bpe_tokenizer):
    """vllm-project/vllm issue 16028 (princeton-pli/retaining-by-doing issue 5: 6 points of MMLU): the
    chat template writes BOS and the tokenizer adds another. The harness adds none to a prompt that
    starts with BOS; a template whose BOS is not first (here after a line break) still doubles it,
    and the doctor counts the BOS ids of the prompt as the runner encodes it."""
    good = with_chat_template(copy_model(tiny_llama_dir, tmp_path / "good"), CHAT)
    bad = with_chat_template(copy_model(tiny_llama_dir, tmp_path / "bad"), "\n" + CHAT)
    healthy = run("doctor", "--ckpts", str(good), "--chat", *NIAH, "--canaries", "0")
    doubled = run("doctor", "--ckpts", str(bad), "--chat", *NIAH, "--canaries", "0")
    assert healthy.lines["prompt bos"].startswith("PASS") and "once" in healthy.lines["prompt bos"]
    assert doubled.code == 1 and doubled.failed("prompt bos", "2 times")


def test_model_that_ends_at_once(eos_model, run, tmp_path):
    """marin-community/marin issue 2064: a RULER wiring that "reported all ~0 scores, likely from
    truncation and/or chat-template/model-args handling". An instruct model prompted the wrong way
    emits EOS at once: the canaries are all empty (FAIL), and eval marks the cell and says so last."""
    out = tmp_path / "out"
    doctor = run("doctor", "--ckpts", str(eos_model), *NIAH, "--canaries", "2")
    ev = run("eval", "--ckpts", str(eos_model), *NIAH, "--samples", "2", "--out", str(out))
    assert doctor.code == 1 and doctor.failed("canaries", "empty", "emits EOS at once")
    assert "!empty" in ev.out and "all 2 predictions are empty" in ev.out.strip().splitlines()[-1]
    cell = json.loads((out / "results.json").read_text())["suites"]["custom"]["per_task"]["niah_single_1"]["1024"]
    assert cell["degenerate"]["empty"] == 1.0
