"""Pickled files from outside (pytorch_model*.bin weights, a run folder's state.pt) are never unpickled.

They are read only with torch.load(weights_only=True), whose unpickler builds tensors, numbers,
strings and containers and refuses anything else: a file that needs more (a planted payload such as
`os.system`, or an old format's numpy arrays) is refused in one line naming what it holds.

    check_pickled_weights(path)     # before any work: UserError if the .bin's pickle needs more
    refused_objects(path, exc)      # "posix.system" / torch's reason, for the one-line error
    refused_load(model_dir, exc)    # the error for a from_pretrained that torch refused

Names come from the pickle's opcodes (torch.serialization.get_unsafe_globals_in_checkpoint) or
torch's refusal; nothing in the file runs.
"""

from __future__ import annotations

import pickle
import warnings
import zipfile
from pathlib import Path

from harness.core.errors import UserError

_FIX = "convert weights you trust to safetensors (save_pretrained(DIR, safe_serialization=True)) or leave it out"


def refused_objects(path: Path, exc: Exception | None = None) -> str:
    """The Python objects the pickle in `path` would import beyond tensors and plain values (up to 3),
    or, when torch cannot scan the file (a bare pickle, not a torch.save zip), its refusal reason."""
    from torch.serialization import get_unsafe_globals_in_checkpoint

    try:
        names = get_unsafe_globals_in_checkpoint(path)
    except Exception:  # noqa: BLE001 - not a torch.save zip: torch's own reason is all there is
        names = []
    if names:
        return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return "" if exc is None else _torch_reason(exc)


def _torch_reason(exc: Exception) -> str:
    """The line of torch's weights-only refusal that says what it met ("Trying to load unsupported
    GLOBAL posix.system ...", "Unsupported operand 149"), without its advice around it."""
    advice = ("Weights only load failed", "Please file an issue", "Check the documentation", "WeightsUnpickler error")
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    said = [line for line in lines if not line.startswith(advice)]
    return (said[0] if said else type(exc).__name__)[:120]


def refusal(path: Path, what: str, fix: str = _FIX) -> UserError:
    return UserError(
        f"{path} was not loaded: it holds more than tensors and plain values ({what}), and unpickling it "
        f"could run any code: {fix}"
    )


def check_pickled_weights(path: Path) -> None:
    """UserError when the pickle in weights file `path` needs objects a safe load refuses.

    A torch.save zip is scanned (its pickle's opcodes only); torch's legacy format (before 1.6, one
    stream torch cannot scan) is loaded once with weights_only=True, which refuses the same things.
    A file that is neither (torch's "Invalid magic number", a truncated zip) is damaged: named here
    in one line, since the real load would end in a traceback."""
    what = refused_objects(path)
    if not what and not zipfile.is_zipfile(path):
        import torch

        try:
            with warnings.catch_warnings():  # torch's notes on the pickle protocol would precede our one line
                warnings.simplefilter("ignore")
                torch.load(path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as exc:
            what = _torch_reason(exc)
        except Exception as exc:  # noqa: BLE001 - torch raises RuntimeError, EOFError, ValueError ... for damage
            raise damaged(path, exc) from None
    if what:
        raise refusal(path, what)


def damaged(path: Path, exc: BaseException) -> UserError:
    """The one-line error for a weights file torch cannot read at all (not a refusal: damage)."""
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:120]
    return UserError(f"{path} is damaged ({reason}): re-download or re-save the model; or leave it out of --ckpts")


def refused_load(model_path: str | Path, exc: pickle.UnpicklingError) -> UserError:
    """The one-line error for a weights load that torch.load(weights_only=True) refused."""
    weights = sorted(Path(model_path).glob("pytorch_model*.bin")) if Path(model_path).is_dir() else []
    for f in weights:
        what = refused_objects(f)
        if what:
            return refusal(f, what)
    # Not scannable (torch's legacy format): torch's reason, and the file when there is only one.
    return refusal(weights[0] if len(weights) == 1 else Path(model_path), _torch_reason(exc))
