"""`harness doctor`: catch a broken set-up in seconds, before GPU-hours go into a table of zeros.

    from harness.pipeline.doctor import run_checks, preflight
    checks = run_checks(cfg, canaries=4)   # every check, canaries (a few real generations) included
    preflight(cfg)                         # what `harness eval` runs first: the cheap checks only

The usual ways a long-context evaluation scores about zero without an error: a context the backend
caps below the requested length, RoPE scaling lost in a conversion, a tokenizer that is not the
model's (no EOS, another vocabulary, other token counts than the server's), a chat template missing
or unused, and a model that emits EOS at once or never stops. Each check prints one line, PASS,
WARN, FAIL or SKIP, with the fix; docs/doctor.md lists them. Canaries run niah_single_1 (no data
needed, near 100 for any sound instruct or base model of a few hundred million parameters) at the
shortest length for real and judge the outputs' shape, not their score: all empty, all identical,
or all reaching max new tokens is a FAIL.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import UserError
from harness.pipeline.doctor_check import FAIL, PASS, SKIP, WARN, Check
from harness.pipeline.doctor_prompt import prompt_checks, thinking_canary_check
from harness.pipeline.doctor_trained import positions_check, trained_window_check

__all__ = ["FAIL", "PASS", "SKIP", "WARN", "Check", "preflight", "run_checks"]

CANARY_TASK = "niah_single_1"
CANARY_LENGTH = 1024  # the shortest RULER length anyone reports; lower when the context is shorter


@dataclass
class _Setup:
    """What the cheap checks found and the later checks read."""

    sources: list
    tokenizer: Any
    context: int
    config: dict  # the model's config fields (config.json or the GGUF header); {} when unknown
    lengths: list[int]  # every length the run would evaluate at (length-controlled tasks)


def _model_config(source) -> dict:
    """config.json's fields (a folder, a cached hub model) or the config transformers reads from a
    GGUF header; {} for a served model or when none can be read (the checks that need it SKIP)."""
    found = _config_json(source)
    if found is not None:
        return found
    if source.checkpoint.kind == "openai":
        return {}
    from harness.models.sources.base import load_target

    target = load_target(source.checkpoint.path)
    try:  # a GGUF file: transformers maps its header to a config
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(target.model, **target.kwargs).to_dict()
    except Exception:  # noqa: BLE001  (any failure: the config-based checks say SKIP)
        return {}


def _run_lengths(cfg, context: int) -> list[int]:
    """Every length the run would evaluate its length-controlled tasks at (none: []): the tasks'
    own lengths under the chosen protocol, as the eval loop computes them."""
    from harness.core.lengths import parse_lengths
    from tasks.registry import get_task, resolve_tasks

    requested = parse_lengths(cfg.lengths) if cfg.lengths else None
    if not cfg.suite and not cfg.tasks:
        return list(requested or [])
    out: set[int] = set()
    for name in resolve_tasks(cfg.suite, cfg.tasks or None, cfg.exclude or None):
        task = get_task(name)
        task.set_protocol(cfg.protocol)
        if task.length_controlled:
            out.update(task.task_lengths(requested, context, cfg.max_length))
    return sorted(out)


def _setup(cfg, checks: list[Check]) -> _Setup | None:
    from harness.models.sources import check_same_tokenizer, resolve_sources

    try:
        sources = resolve_sources(cfg)
        check_same_tokenizer(sources)
        for src in sources:
            src.check(cfg.backend)
        tokenizer = sources[0].load_tokenizer(light=False)
        context = min(src.context_length(cfg.max_model_len) for src in sources)
    except UserError as exc:
        checks.append(Check("model", FAIL, str(exc)))
        return None
    lengths = _run_lengths(cfg, context)  # a flag's mistake: a UserError (exit 2), not a FAIL of the model
    names = ", ".join(s.checkpoint.path for s in sources[:3]) + (f" (+{len(sources) - 3})" if len(sources) > 3 else "")
    checks.append(Check("model", PASS, f"{len(sources)} model(s) load their config and tokenizer: {names}"))
    return _Setup(sources, tokenizer, context, _model_config(sources[0]), lengths)


def _check_context(cfg, s: _Setup) -> Check:
    from harness.core.lengths import format_length

    src = s.sources[0]
    served = (src.provenance().get("endpoint") or {}).get("served_max_model_len")
    where = f"the server's max_model_len {served}" if served else f"the context {s.context}"
    if not s.lengths:
        return Check("context", PASS, f"{where} tokens (no length-controlled task asked)")
    longest = max(s.lengths)
    if longest > s.context:
        fix = src.context_fix
        return Check(
            "context",
            FAIL,
            f"longest length {format_length(longest)} ({longest} tokens) > {where} of {src.checkpoint.path}: {fix}",
        )
    return Check("context", PASS, f"longest length {format_length(longest)} fits {where}")


def _check_rope(cfg, s: _Setup) -> Check:
    served = s.sources[0].checkpoint.kind == "openai"
    positions = s.config.get("max_position_embeddings")
    if not isinstance(positions, int):
        why = (
            "the served model's config.json is not on this machine: pass --tokenizer DIR holding it to check "
            "its trained positions and RoPE scaling"
            if served
            else "the model's config is not readable here"
        )
        return Check("rope", SKIP, f"{why}: positions not checked")
    # transformers 5 keeps rope_theta and the scaling in rope_parameters; older configs at the top
    found = s.config.get("rope_parameters")
    params: dict = found if isinstance(found, dict) else {}
    scaled = params if params.get("rope_type", "default") != "default" else None
    scaling = cfg.rope_scaling or s.config.get("rope_scaling") or scaled
    origin = "--rope-scaling" if cfg.rope_scaling else "config.json"
    longest = max(s.lengths) if s.lengths else s.context
    # a served model's RoPE is the server's: only a flag it was started with can change it
    fix = (
        "unless the server was started with a RoPE scaling override (vLLM --hf-overrides), scores there "
        "measure extrapolation"
        if served
        else "scores there measure extrapolation; pass --rope-scaling '{...}' or restore rope_scaling in config.json"
    )
    if scaling:
        kind = scaling.get("rope_type") or scaling.get("type") if isinstance(scaling, dict) else scaling
        reach = _scaled_reach(scaling, positions, s.config)
        if reach is not None and longest > reach:
            return Check(
                "rope",
                WARN,
                f"lengths up to {longest} run past the {reach} positions RoPE scaling {kind} (from {origin}) "
                f"covers: {fix}",
            )
        return Check("rope", PASS, f"RoPE scaling {kind} (from {origin}); {positions} trained positions")
    if longest > positions and cfg.rope_theta is None:
        return Check(
            "rope",
            WARN,
            f"lengths up to {longest} run past the {positions} trained positions with no RoPE scaling "
            f"(lost in a conversion?): {fix}",
        )
    theta = cfg.rope_theta or s.config.get("rope_theta") or params.get("rope_theta")
    return Check("rope", PASS, f"{positions} positions cover every length (rope_theta {theta})")


def _scaled_reach(scaling, positions: int, config: dict) -> int | None:
    """The positions a RoPE scaling with a factor covers: factor x the original positions (YaRN,
    linear, dynamic), or the config's own max_position_embeddings where that is larger (Llama 3.1's
    "llama3" type: factor 8 on 8192 originals, 131072 positions); None without a factor."""
    if not isinstance(scaling, dict) or not isinstance(scaling.get("factor"), (int, float)):
        return None
    original = scaling.get("original_max_position_embeddings") or config.get("original_max_position_embeddings")
    base = original if isinstance(original, int) else positions
    return max(positions, int(scaling["factor"] * base))


def _config_ids(config: dict, key: str) -> set[int]:
    value = config.get(key)
    values = value if isinstance(value, list) else [value]
    return {v for v in values if isinstance(v, int)}


def _check_tokenizer(cfg, s: _Setup, probe_server: bool = True) -> list[Check]:
    """The tokenizer is the model's: its EOS, its BOS, its vocabulary (and a server's token counts)."""
    out = [_check_eos(s), _check_bos(s)]
    vocabulary = _check_vocabulary(s)
    if vocabulary is not None:
        out.append(vocabulary)
    if probe_server:
        out.append(_check_served_tokens(cfg, s))
    return out


def _check_eos(s: _Setup) -> Check:
    tok = s.tokenizer
    eos = tok.eos_token_id
    if eos is None:
        return Check(
            "tokenizer eos",
            FAIL,
            "the tokenizer has no EOS token: generation never stops before max new tokens; "
            "use the model's own tokenizer",
        )
    model_eos = _config_ids(s.config, "eos_token_id")
    if model_eos and eos not in model_eos:
        return Check(
            "tokenizer eos",
            WARN,
            f"the tokenizer's EOS id {eos} is not the model's ({sorted(model_eos)} in config.json): "
            "is the tokenizer the model's?",
        )
    return Check("tokenizer eos", PASS, f"EOS {tok.eos_token!r} (id {eos})")


def _check_bos(s: _Setup) -> Check:
    tok = s.tokenizer
    ids = tok("a", add_special_tokens=True)["input_ids"]
    model_bos = _config_ids(s.config, "bos_token_id")
    template = getattr(tok, "chat_template", None)
    writes_bos = isinstance(template, str) and bool(tok.bos_token) and tok.bos_token in template
    if model_bos and (not ids or ids[0] not in model_bos) and tok.bos_token_id in model_bos and writes_bos:
        # SmolLM2, Qwen: BOS is the turn marker their chat template writes, not a prompt prefix
        return Check("tokenizer bos", PASS, f"no BOS added; the chat template writes {tok.bos_token!r} itself")
    if model_bos and (not ids or ids[0] not in model_bos) and tok.bos_token_id in model_bos:
        return Check(
            "tokenizer bos",
            WARN,
            f"the model was trained with BOS id {sorted(model_bos)} but the tokenizer does not add it: "
            "prompts start without it; check tokenizer_config.json's add_bos_token",
        )
    if model_bos and tok.bos_token_id is not None and tok.bos_token_id not in model_bos:
        return Check(
            "tokenizer bos",
            WARN,
            f"the tokenizer's BOS id {tok.bos_token_id} is not the model's {sorted(model_bos)}: "
            "is the tokenizer the model's?",
        )
    added = "adds" if tok.bos_token_id is not None and ids and ids[0] == tok.bos_token_id else "adds no"
    return Check("tokenizer bos", PASS, f"the tokenizer {added} BOS, as the model's config says")


def _check_vocabulary(s: _Setup) -> Check | None:
    """The tokenizer's ids index the model's embedding; None when the config gives no vocab_size."""
    tok = s.tokenizer
    vocab = s.config.get("vocab_size")
    base = _base_vocab(tok) or len(tok)  # without added tokens
    if isinstance(vocab, int) and base > vocab:
        return Check(
            "vocabulary",
            FAIL,
            f"the tokenizer has {base} tokens, the model's embedding {vocab}: ids past {vocab - 1} "
            "index nothing; use the model's own tokenizer",
        )
    if isinstance(vocab, int) and len(tok) > vocab:
        # added tokens past the embedding (a GGUF conversion's <|endoftext|>): harmless while no
        # prompt holds their text
        extra = tok.convert_ids_to_tokens(list(range(vocab, min(len(tok), vocab + 3))))
        return Check(
            "vocabulary",
            WARN,
            f"{len(tok) - vocab} added token(s) past the model's {vocab} embeddings ({', '.join(map(str, extra))}"
            f"{', ...' if len(tok) - vocab > 3 else ''}): a prompt holding their text would index nothing",
        )
    if isinstance(vocab, int):
        return Check("vocabulary", PASS, f"{len(tok)} tokenizer tokens within the model's {vocab}")
    return None


def _check_served_tokens(cfg, s: _Setup) -> Check:
    """A served model: the server's token count of one prompt equals the local tokenizer's (vLLM
    and SGLang answer POST /tokenize at the server root); otherwise lengths are measured wrong."""
    if s.sources[0].checkpoint.kind != "openai":
        return Check("served tokens", SKIP, "not a served model")
    from harness.models.runners.endpoint import server_token_count

    prompt = "The grass is green. The sky is blue. " * 8 + "What is the special magic number?"
    served = server_token_count(cfg.base_url, cfg.model, prompt, cfg.api_key_env)
    if served is None:
        return Check("served tokens", SKIP, "the server cannot count tokens (no /tokenize): counts not compared")
    local = len(s.tokenizer(prompt, add_special_tokens=True)["input_ids"])
    if served != local:
        return Check(
            "served tokens",
            FAIL,
            f"the server counts {served} tokens of a probe prompt, --tokenizer {local}: the local tokenizer is not "
            "the served model's; pass --tokenizer with the served model's own",
        )
    return Check("served tokens", PASS, f"server and --tokenizer count the probe prompt alike ({local} tokens)")


def _check_format(cfg, s: _Setup) -> list[Check]:
    has_template = bool(getattr(s.tokenizer, "chat_template", None))
    served = s.sources[0].checkpoint.kind == "openai"
    out = []
    if cfg.system_prompt is not None and not cfg.chat_template:
        out.append(Check("chat", FAIL, "--system-prompt without --chat: a system turn exists only in a chat template"))
    elif cfg.chat_template and not has_template and not served:
        out.append(
            Check("chat", FAIL, "--chat asked but the tokenizer has no chat template: drop --chat for a base model")
        )
    elif cfg.chat_template:
        out.append(Check("chat", PASS, "--chat: prompts go through the model's chat template"))
    elif has_template:
        out.append(
            Check(
                "chat",
                WARN,
                "the tokenizer has a chat template (an instruct model?) but --chat is not given: prompts go "
                "unwrapped, as to a base model; pass --chat to evaluate it as the instruct model it is",
            )
        )
    else:
        out.append(Check("chat", PASS, "base-model prompting (no chat template, no --chat)"))
    if cfg.chat_template and not cfg.no_answer_prefix:
        out.append(
            Check(
                "answer prefix",
                WARN,
                "with --chat the answer prefix follows the assistant header (RULER's convention); a reasoning "
                "model that must think first wants --no-answer-prefix",
            )
        )
    return out


def cheap_checks(cfg, probe_server: bool = True) -> tuple[list[Check], _Setup | None]:
    """Every check that needs no generation: model files, context, RoPE, tokenizer, prompt format.
    probe_server False: no request beyond the model list (the served token counts are not compared)."""
    checks: list[Check] = []
    s = _setup(cfg, checks)
    if s is None:
        return checks, None
    checks.append(_check_context(cfg, s))
    # a config claiming positions no model has: FAIL instead of "N positions cover every length"
    checks.append(positions_check(s.config) or _check_rope(cfg, s))
    checks += trained_window_check(s.config, s.sources, s.lengths)  # lengths past harness_training.json's window
    checks += _check_tokenizer(cfg, s, probe_server)
    checks += _check_format(cfg, s)
    checks += prompt_checks(cfg, s.tokenizer, s.context)  # chat turns kept, one BOS, the budget
    return checks, s


def _canary_length(s: _Setup) -> int:
    shortest = min(s.lengths) if s.lengths else CANARY_LENGTH
    return max(256, min(shortest, CANARY_LENGTH, s.context))


def canary_checks(cfg, s: _Setup, n: int) -> list[Check]:
    """niah_single_1 at the shortest length, n samples, run for real: the outputs' shape."""
    from harness.core.lengths import format_length
    from harness.pipeline.evaluate import run_eval
    from harness.pipeline.store import read_store

    length = _canary_length(s)
    with tempfile.TemporaryDirectory(prefix="harness-doctor-") as tmp:
        canary = dataclasses.replace(
            cfg,
            suite=None,
            tasks=[CANARY_TASK],
            exclude=[],
            lengths=str(length),
            samples=n,
            out=str(Path(tmp) / "canary"),
            name="doctor",
            progress=False,
            data_parallel=1,
            ray_address=None,
            max_new_tokens=None,
        )
        try:
            run_eval(canary, print_table=False)
        except UserError as exc:
            return [Check("canaries", FAIL, f"{CANARY_TASK} at {format_length(length)} did not run: {exc}")]
        _, records = read_store(Path(canary.out) / "samples.jsonl")
    what = f"{CANARY_TASK} at {format_length(length)}"
    thinking = thinking_canary_check(records, cfg, what)  # a reasoning model's outputs, read first
    return [thinking] if thinking is not None else judge_canaries(records, s.tokenizer, what)


def judge_canaries(records: list[dict], tokenizer, what: str) -> list[Check]:
    """The canaries' outputs judged by their shape (harness.core.degenerate), their predictions shown."""
    from harness.core.degenerate import Degenerate, describe_causes

    preds = [r["prediction"] for r in records]
    shown = "; ".join(repr(p[:40] + ("…" if len(p) > 40 else "")) for p in preds[:4])
    d = Degenerate.of(records, tokenizer)
    score = 100.0 * sum(r["score"] for r in records) / max(1, len(records))
    if d.empty == d.total:
        return [
            Check(
                "canaries",
                FAIL,
                f"every prediction of {what} is empty ({d.total}/{d.total}): " + describe_causes("empty"),
            )
        ]
    if d.total > 1 and len(set(preds)) == 1:
        return [
            Check(
                "canaries",
                FAIL,
                f"every prediction of {what} is the same text {preds[0][:40]!r}: " + describe_causes("identical"),
            )
        ]
    if d.at_max == d.total:
        return [
            Check("canaries", FAIL, f"every prediction of {what} ran to max new tokens: " + describe_causes("at_max"))
        ]
    status = PASS if score > 0 else WARN
    note = "" if score > 0 else " (0 on the easiest task: check the prompt format and the model)"
    return [Check("canaries", status, f"{what}: score {score:.0f}{note}; predictions {shown}")]


def run_checks(cfg, canaries: int = 4) -> list[Check]:
    """Every check; canaries only when the cheap checks found nothing that fails."""
    checks, s = cheap_checks(cfg)
    if canaries > 0 and s is not None and not any(c.status == FAIL for c in checks):
        if s.sources[0].checkpoint.kind == "openai":  # the server takes the run's longest request whole
            from harness.pipeline.doctor_served import served_context_check

            checks.append(served_context_check(cfg, s.tokenizer, s.context))
        checks += canary_checks(cfg, s, canaries)
    elif canaries > 0:
        checks.append(Check("canaries", SKIP, "not run: fix the failures above first"))
    return checks


def _base_vocab(tok) -> int | None:
    """Tokens of the tokenizer's own vocabulary, added tokens left out (a light or a full tokenizer)."""
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is not None:
        return int(backend.get_vocab_size(with_added_tokens=False))
    size = getattr(tok, "vocab_size", None)
    return size if isinstance(size, int) else None


def preflight(cfg) -> None:
    """The cheap checks before `harness eval` loads anything else, those whose failure eval would
    otherwise meet only as a table of zeros (no EOS, a vocabulary past the embedding): a FAIL stops
    the run (exit 2) unless --no-doctor. The served token counts are the doctor's alone (eval sends a
    server nothing but its own requests). Light on purpose (the generation tokenizer and config.json only, so a re-run
    with nothing to compute still never imports transformers); the failures eval reports itself
    (model files, context, chat template) are left to it."""
    from harness.models.sources import resolve_sources

    try:
        sources = resolve_sources(cfg)
        tok = sources[0].load_tokenizer(light=True)
    except UserError:
        return  # planning says what is wrong, in its own words
    config = _config_json(sources[0]) or {}
    failed = []
    if tok.eos_token_id is None:
        failed.append(
            "tokenizer eos: the tokenizer has no EOS token: generation never stops before max new tokens; "
            "use the model's own tokenizer"
        )
    vocab, base = config.get("vocab_size"), _base_vocab(tok)
    if isinstance(vocab, int) and base is not None and base > vocab:
        failed.append(
            f"vocabulary: the tokenizer has {base} tokens, the model's embedding {vocab}: ids past {vocab - 1} "
            "index nothing; use the model's own tokenizer"
        )
    if failed:
        raise UserError(
            "; ".join(failed) + " (harness doctor with the same flags runs every check; --no-doctor skips them)"
        )


def _config_json(source) -> dict | None:
    """config.json's fields where the model has one on this machine (a folder, a cached hub model;
    {} when it is unreadable); None where it has none (a served model, a GGUF file, a hub model not
    in the cache). No transformers: the preflight reads it."""
    from harness.models.runners.common import _model_file
    from harness.models.sources.base import load_target

    if source.checkpoint.kind == "openai":
        # the server's own config is not served; the local copy its tokenizer comes from, when it
        # holds one, says the trained positions and RoPE scaling the weights were made for
        path = _model_file(source.local_model, "config.json")
    else:
        target = load_target(source.checkpoint.path)
        path = _model_file(target.model, "config.json") if not target.kwargs else None
    if path is None:
        return None
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
