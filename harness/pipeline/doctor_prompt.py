"""`harness doctor`'s checks of the prompt and its token budget (harness/pipeline/doctor.py runs them).

    from harness.pipeline.doctor_prompt import prompt_checks, budget_needs, thinking_canary_check
    checks = prompt_checks(cfg, tokenizer, context)   # chat turns kept, one BOS, budget within the context
    need = budget_needs(cfg, tokenizer)              # [(tokens, task, length)]: prompt + thinking + answer

Each names a way a run scores about zero with no error, seen in public trackers (docs/failure-modes.md):
  - the chat template leaves out a turn: the user's (the haystack) or the system's (SUS-Chat issue 3);
  - the prompt carries BOS twice, once from the template and once from the tokenizer (vLLM issue 16028);
  - a prompt with its thinking and answer budgets past the context: the server answers 400 to every
    request (allenai/olmo-eval issue 310) or the context is cut to fit (huggingface/open-r1 issue 310);
  - a reasoning model whose thought fills the budget, or whose thought is scored as its answer
    (scitix/sieval PR 11, allenai/olmo-eval issue 348).
"""

from __future__ import annotations

from types import SimpleNamespace

from harness.core.errors import UserError
from harness.pipeline.doctor_check import FAIL, PASS, Check

# A user turn and a system turn whose text must reach the prompt the model is given.
PROBE_USER = "Question: what is the special magic number for harness-probe-7?"
PROBE_SYSTEM = "You answer with the number alone (harness probe)."


def prompt_checks(cfg, tokenizer, context: int) -> list[Check]:
    """The chat template's turns (with --chat), the BOS count and the budget; each one line."""
    out = []
    if cfg.chat_template and getattr(tokenizer, "chat_template", None):
        out.append(check_chat_turns(cfg, tokenizer))
    bos = check_prompt_bos(cfg, tokenizer)
    if bos is not None:
        out.append(bos)
    budget = check_budget(cfg, tokenizer, context)
    if budget is not None:
        out.append(budget)
    return out


def _render(cfg, tokenizer) -> str:
    """The probe as the run would send it: through the chat template with --chat, else as is."""
    from harness.pipeline.reasoning import chat_prompt

    if not cfg.chat_template or not getattr(tokenizer, "chat_template", None):
        return PROBE_USER
    system = PROBE_SYSTEM if cfg.system_prompt is not None else None
    return chat_prompt(tokenizer, SimpleNamespace(input=PROBE_USER, answer_prefix=""), system)


def check_chat_turns(cfg, tokenizer) -> Check:
    """The chat template writes the user turn's text (and --system-prompt's) into the prompt."""
    try:
        text = _render(cfg, tokenizer)
    except Exception as exc:  # noqa: BLE001  (a template that raises on these turns: named, not a traceback)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return Check(
            "chat turns", FAIL, f"the chat template cannot render the run's turns ({first}): fix it or drop --chat"
        )
    if PROBE_USER not in text:
        return Check(
            "chat turns",
            FAIL,
            "the chat template leaves the user turn's text out of the prompt: the model would never see the "
            "task input (the haystack); fix the template or drop --chat",
        )
    if cfg.system_prompt is not None and PROBE_SYSTEM not in text:
        return Check(
            "chat turns",
            FAIL,
            "the chat template leaves the system turn out of the prompt (it renders no 'system' role): "
            "--system-prompt would be dropped in silence; put the instruction in the task or fix the template",
        )
    turns = "user and system turns" if cfg.system_prompt is not None else "user turn"
    return Check("chat turns", PASS, f"the chat template writes the {turns} into the prompt")


def check_prompt_bos(cfg, tokenizer) -> Check | None:
    """The prompt as the runner encodes it holds the BOS token once (None: the tokenizer has no BOS)."""
    from harness.models.runners.common import prompt_ids

    bos = tokenizer.bos_token_id
    if bos is None:
        return None
    try:
        ids = prompt_ids(tokenizer, _render(cfg, tokenizer))
    except Exception:  # noqa: BLE001  (a template that cannot render is check_chat_turns's FAIL)
        return None
    n = ids.count(bos)
    if n > 1:
        return Check(
            "prompt bos",
            FAIL,
            f"the prompt holds BOS {tokenizer.bos_token!r} {n} times (its first ids {ids[:4]}): the chat template "
            "writes one and the tokenizer adds another, which costs accuracy; fix the template (nothing before "
            "its bos_token) or the tokenizer's add_bos_token",
        )
    where = "at its start" if ids and ids[0] == bos else "not at its start" if n else "nowhere"
    return Check("prompt bos", PASS, f"the prompt holds BOS {tokenizer.bos_token!r} {'once, ' if n else ''}{where}")


def budget_needs(cfg, tokenizer, context: int) -> list[tuple[int, str, int]]:
    """(tokens a request may need, task, length) for every generation task and length of the run:
    the longest prompt a length admits, the thinking budget (with its forced close), the answer's."""
    from harness.core.lengths import parse_lengths
    from harness.pipeline.reasoning import Options, parse_max_new_tokens
    from harness.pipeline.thinking import thinking_room
    from tasks.registry import get_task, resolve_tasks

    if not cfg.suite and not cfg.tasks:
        return []
    options = Options(max_new_tokens=parse_max_new_tokens(cfg.max_new_tokens))
    room = thinking_room(cfg.max_thinking_tokens, tokenizer)
    requested = parse_lengths(cfg.lengths) if cfg.lengths else None
    out = []
    for name in resolve_tasks(cfg.suite, cfg.tasks or None, cfg.exclude or None):
        task = get_task(name)
        task.set_protocol(cfg.protocol)
        if task.kind != "generate":
            continue
        own = task.max_new_tokens
        answer = options.tokens_for(name, own)
        for L in task.task_lengths(requested, context, cfg.max_length):
            if L > 0:  # a length is the prompt and the task's own answer budget together
                out.append((max(0, L - own) + room + answer, name, L))
    return out


def check_budget(cfg, tokenizer, context: int) -> Check | None:
    """Prompt + thinking + answer within the context for every task and length (None: no generation task)."""
    from harness.core.lengths import format_length

    try:
        needs = budget_needs(cfg, tokenizer, context)
    except UserError as exc:
        return Check("budget", FAIL, str(exc))
    if not needs:
        return None
    need, task, L = max(needs)
    parts = "prompt + thinking + answer" if cfg.max_thinking_tokens else "prompt + answer"
    if need > context:
        return Check(
            "budget",
            FAIL,
            f"{task} at {format_length(L)} needs up to {need} tokens ({parts}) > the context {context}: a server "
            "answers 400 to every such request, others cut the prompt; lower --max-new-tokens"
            + ("/--max-thinking-tokens" if cfg.max_thinking_tokens else "")
            + " or the lengths, or raise the context",
        )
    return Check(
        "budget", PASS, f"{parts} fit the context: at most {need} of {context} tokens ({task} at {format_length(L)})"
    )


def thinking_canary_check(records: list[dict], cfg, what: str) -> Check | None:
    """The canaries of a reasoning model: a thought that never closed in every one (the budget ran out
    while thinking), or thoughts that would be scored as the answer. None: nothing to say."""
    from harness.pipeline.thinking import THINK_CLOSE, THINK_OPEN, split_thought

    raws = [(r.get("metadata") or {}).get("raw_prediction", r.get("prediction") or "") for r in records]
    if not raws:
        return None
    budgeted = [r for r in records if isinstance((r.get("metadata") or {}).get("thinking_cut"), bool)]
    if not budgeted and all(THINK_OPEN in raw and not split_thought(raw).closed for raw in raws):
        return Check(
            "canaries",
            FAIL,
            f"every prediction of {what} ran out of tokens inside its thought (<think> never closed): one budget "
            "for thinking and answer leaves no answer; pass --max-thinking-tokens N (the answer keeps its own "
            "budget) or a larger --max-new-tokens",
        )
    thinking = sum(THINK_OPEN in raw or THINK_CLOSE in raw for raw in raws)
    if thinking and not (cfg.strip_thinking or cfg.max_thinking_tokens):
        return Check(
            "canaries",
            FAIL,
            f"{thinking} of {len(raws)} predictions of {what} hold a <think> block, and neither --strip-thinking "
            "nor --max-thinking-tokens is given: the thought would be scored as the answer (a needle repeated "
            "while thinking counts as found); pass --strip-thinking",
        )
    return None
