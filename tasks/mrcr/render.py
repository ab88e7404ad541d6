"""How an MRCR conversation becomes the model's input: one rendering per protocol.

- "reference" (needs --chat): the released messages, as they are, sent as chat turns: through the
  model's own chat template with the generation prompt after the last user turn
  (harness.pipeline.reasoning.chat_prompt: tokenizer.apply_chat_template(messages,
  add_generation_prompt=True)), or to a served model's /v1/chat/completions as the card's
  client.chat.completions.create(model, messages) sends them. chat_text counts the same text.
- "completion" (base checkpoints, which have no chat template): the doc_to_text of lm-eval's MRCR
  task as written by the author of lm-eval issue 3370 (jannalulu/lm-evaluation-harness, branch mrcr,
  lm_eval/tasks/mrcr/utils.py), the one published text rendering: each message as
  "<Role>: <content>" (the role capitalised), joined by a blank line. We add the answer prefix
  "\\n\\nAssistant:" in the same pattern so that a base model continues as the assistant; the
  separating space the pattern puts after "Assistant:" is taken off the front of the continuation
  before grading (tasks.mrcr.tasks), as a chat route's reply has none.
"""

from __future__ import annotations

from harness.core.errors import UserError

COMPLETION_ANSWER_PREFIX = "\n\nAssistant:"


def completion_text(messages) -> str:
    """That doc_to_text, of the parsed messages."""
    return "\n\n".join(f"{m['role'].capitalize()}: {m['content']}" for m in messages)


def chat_text(tokenizer, messages) -> str:
    """The conversation through the tokenizer's chat template, ending at the assistant's header."""
    if not getattr(tokenizer, "chat_template", None):
        raise UserError(
            "MRCR's reference protocol sends the conversation through the model's chat template, and none was "
            "loaded: pass --chat for a chat model, or --protocol completion for a base checkpoint"
        )
    import jinja2

    try:
        return tokenizer.apply_chat_template([dict(m) for m in messages], tokenize=False, add_generation_prompt=True)
    except jinja2.TemplateError as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UserError(
            f"the tokenizer's chat template cannot render an MRCR conversation ({first}): fix its chat_template, "
            "or pass --protocol completion"
        ) from None
