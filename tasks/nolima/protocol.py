"""NoLiMa's two input protocols: what a record's length means under each.

"reference" (the default) shows the model what adobe-research/NoLiMa (7532e4e) shows it. Its
`context_length` (evaluation/run_config/multi_test_config_book_*.yaml) counts the haystack alone,
in the evaluated model's tokens and decimal units: 250, 500, 1000, 2000, 4000, 8000, 16000,
32000. The template, question and chat turns come on top, and 192 tokens are generated
(model_configs/*.json max_tokens). A record's length is that haystack size, so "1000" is the
reference's 1K column exactly.

"exact-length" is this harness's rule for comparisons across tokenizers: a length L is the whole
budget (prompt + 192 generated tokens) in 1024 units, the haystack the largest that fits.

--lengths under "reference": the parser reads k as 1024 (RULER's names), so each parsed value is
mapped to a haystack size in the reference's units (see reference_length):
  Nk (N x 1024)                 -> N x 1000 tokens   (1k -> 1000, 32k -> 32000, 128k -> 128000)
  256, 512                      -> 250, 500          (the binary names of NoLiMa's two short lengths)
  a multiple of 250 as written  -> itself            (500, 1000, 4000, 16000, ...)
Anything else (768, 1536, 4097) names no length of the reference: one line, exit 2.
"""

from __future__ import annotations

from harness.core.errors import UserError

PROTOCOLS = ("reference", "exact-length")
# run_tests.sh runs these eight configs, in this order
REFERENCE_LENGTHS = (250, 500, 1000, 2000, 4000, 8000, 16000, 32000)
# async_api_connector.APIConnector.SYSTEM_PROMPT for the vllm/openai providers; generate_response
# always sends it (add_default_system_prompt defaults to True and no caller changes it), so the
# needle set's own "system_prompt" field is never used for these providers.
REFERENCE_SYSTEM_PROMPT = "You are a helpful assistant"

_FIX = (
    "under --protocol reference a length is NoLiMa's haystack size: write 256 and 512 (its 250 and 500), "
    "Nk for N x 1000 tokens (1k-32k is its grid), or a multiple of 250 as written; "
    "for any other size use --protocol exact-length"
)


def reference_length(parsed: int) -> int:
    """A parsed --lengths value -> the haystack size it names in the reference's units."""
    if parsed % 1024 == 0 and parsed % 1000 != 0:  # "Nk": the reference's N K
        return parsed // 1024 * 1000
    if parsed in (256, 512):
        return parsed * 1000 // 1024
    if parsed % 250 == 0:  # a decimal count as the reference's configs write it
        return parsed
    raise UserError(f"NoLiMa length {parsed} names no haystack size of the reference: {_FIX}")


def reference_lengths(requested: list[int] | None) -> list[int]:
    """The haystack sizes to run: the reference's grid, or the requested lengths mapped."""
    if requested is None:
        return list(REFERENCE_LENGTHS)
    return sorted({reference_length(L) for L in requested})
