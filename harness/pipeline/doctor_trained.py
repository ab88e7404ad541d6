"""`harness doctor`'s checks of the positions a model claims against what it was trained at
(harness/pipeline/doctor.py runs them beside the RoPE check).

    from harness.pipeline.doctor_trained import positions_check, trained_window_check
    checks = [positions_check(config) or rope_check, *trained_window_check(sources, lengths)]

config.json's max_position_embeddings is a claim, and a fine-tuned checkpoint copies its base
model's: a model `harness train` trained at a 1,024-token window keeps the 131,072 of its base, and
"131072 positions cover every length" then says nothing about the run that made it. Two checks:

- positions past any model (above 2**24, the 16M the harness takes as a token count anywhere:
  the longest public context is 10M) cannot be true: a damaged or edited config, FAIL;
- lengths past the window harness_training.json records (the longest sequence this training ever
  saw): WARN, not FAIL, because evaluating past the training window is a study this harness is
  for (train at 64K, evaluate to 128K) and the base model may have been trained that long; the
  line names the window, so a score past it is read as what the base kept or as extrapolation,
  never as what the training taught.
"""

from __future__ import annotations

from harness.core.validate import MAX_TOKENS
from harness.pipeline.doctor_check import FAIL, WARN, Check


def positions_check(config: dict) -> Check | None:
    """FAIL when config.json claims more positions than any model has; None otherwise."""
    positions = config.get("max_position_embeddings")
    if isinstance(positions, int) and not isinstance(positions, bool) and positions > MAX_TOKENS:
        return Check(
            "rope",
            FAIL,
            f"config.json claims {positions} positions, more than any model is built for (at most {MAX_TOKENS}): "
            "a damaged or edited config; restore max_position_embeddings from the model's source",
        )
    return None


def _windows(sources) -> dict[str, int]:
    """checkpoint path -> the window harness_training.json records (checkpoints `harness train` wrote)."""
    out = {}
    for src in sources:
        training = getattr(src.checkpoint, "training", None)
        window = training.get("window") if isinstance(training, dict) else None
        if isinstance(window, int) and not isinstance(window, bool) and window > 0:
            out[src.checkpoint.path] = window
    return out


def trained_window_check(config: dict, sources, lengths: list[int]) -> list[Check]:
    """A WARN when the run's lengths go past the window the checkpoints were trained at."""
    from harness.core.lengths import format_length

    windows = _windows(sources)
    if not windows or not lengths:
        return []
    path, window = min(windows.items(), key=lambda kv: kv[1])
    longest = max(lengths)
    if longest <= window:
        return []
    positions = config.get("max_position_embeddings")
    claim = f"config.json's {positions} positions" if isinstance(positions, int) else "config.json's positions"
    return [
        Check(
            "trained length",
            WARN,
            f"lengths up to {format_length(longest)} run past the {window}-token window {path} was trained at "
            f"(harness_training.json); {claim} are its base model's claim, not this training's: scores past "
            f"{format_length(window)} measure what the base model kept, or extrapolation",
        )
    ]
