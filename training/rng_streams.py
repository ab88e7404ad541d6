"""Every random-number stream of a training process, saved and restored with its state.

    from training.rng_streams import rng_state, set_rng_state
    state = rng_state()     # Python's, numpy's, torch's (and CUDA's) generators
    set_rng_state(state)    # the same draws again, on resume

The state is stored in types torch.load(weights_only=True) reads back exactly (training.checkpointing
loads run folders that way): no pickled numpy objects.
"""

from __future__ import annotations

import random


def rng_state() -> dict:
    """Every RNG stream of this process, in types torch.load(weights_only=True) reads back exactly:
    Python's state is a tuple of ints (and None or a float), numpy's legacy MT19937 state is split
    into its fields with the 624 uint32 keys as an int64 tensor."""
    import numpy as np
    import torch

    kind, keys, pos, has_gauss, cached_gaussian = np.random.get_state(legacy=True)
    numpy_state = {
        "kind": str(kind),
        "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
        "pos": int(pos),
        "has_gauss": int(has_gauss),
        "cached_gaussian": float(cached_gaussian),
    }
    state = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    import numpy as np
    import torch

    random.setstate(state["python"])
    n = state["numpy"]
    keys = n["keys"].numpy().astype(np.uint32)
    np.random.set_state((n["kind"], keys, n["pos"], n["has_gauss"], n["cached_gaussian"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
