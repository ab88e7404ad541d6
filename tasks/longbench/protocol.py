"""LongBench v1's two input protocols: pred.py's own ("reference", the default) and ours ("exact-length").

reference: what LongBench/pred.py feeds a model. Its prompt budget is config/model2maxlen.json's
entry for the model: 3500 for the 4K models (llama2-7b-chat-4k), 7500 for 8K (xgen, internlm),
15500 for 16K (vicuna-v1.5-16k), 31500 for 32K (longchat-32k, chatglm2/3-32k). Every entry is
1000 * K - 500 for a K-thousand-token model, K being its context in units of 1024 positions
(4096 -> 4, 32768 -> 32), so `reference_budget` applies that rule to any context: 2048 -> 1500,
131072 -> 127500; a context between multiples of 1024 rounds down (5000 -> 3500), so the budget
plus the longest generation (512) always fits (1000K - 500 + 512 <= 1024K for K >= 1). The prompt
alone (before any chat wrapping) is cut to that budget with pred.py's middle rule, the same budget
for all 21 tasks, and that budget is the record's length. pred.py wraps prompts in the model's chat
format except on trec, triviaqa, samsum, lsht, lcc and repobench-p ("chat models are better off
without build prompts on these tasks").

exact-length: this project's earlier rule: the length L is the whole budget (prompt + the task's
max_new_tokens, the model's context by default), the prompt is cut to L - max_new_tokens and
trimmed further when pred.py's cut re-encodes over it, and --chat wraps every task.
"""

from __future__ import annotations

from harness.core.errors import UserError

REFERENCE = "reference"
EXACT = "exact-length"
PROTOCOLS = (REFERENCE, EXACT)

# pred.py keeps int(B/2) tokens from each end; at B < 2 that is 0, and its ids[-0:] is the whole
# prompt again, so a smaller budget would silently mean "no truncation".
MIN_BUDGET = 2


def reference_budget(context: int) -> int:
    """pred.py's model2maxlen for a model of `context` positions: 1000 * (context // 1024) - 500."""
    budget = 1000 * (context // 1024) - 500
    if budget < MIN_BUDGET:
        raise UserError(
            f"LongBench's reference prompt budget (1000 per 1024 positions, minus 500) needs a model context "
            f"of at least 1024 tokens, this one has {context}: pass --max-length N (the prompt budget) "
            f"or --protocol exact-length"
        )
    return budget


def check_budget(budget: int, context: int, task: str, max_new_tokens: int) -> int:
    """A --max-length under the reference protocol: the prompt budget, which must leave the task's
    generation room in the context."""
    if budget < MIN_BUDGET:
        raise UserError(
            f"--max-length {budget} is below LongBench's minimum prompt budget {MIN_BUDGET} (under the reference "
            f"protocol it is the prompt budget; pred.py keeps half of it from each end): pass --max-length {MIN_BUDGET} or more"
        )
    if budget + max_new_tokens > context:
        raise UserError(
            f"--max-length {budget} (the prompt budget under the reference protocol) + {max_new_tokens} tokens "
            f"{task} generates exceed the model's context {context}: pass --max-length {context - max_new_tokens} or less"
        )
    return budget
