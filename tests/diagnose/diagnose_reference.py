"""Brute-force references for the RoPE diagnostic tests: full L×L matrices built directly.

Independent of harness.diagnose: hidden states come from transformers' own forward
(output_hidden_states; eager, or sdpa for float64 models), q/k from the layer's modules and transformers' apply_rotary_pos_emb, and
Eq. 4 / Eq. 5 are evaluated on whole attention matrices with the normalisation written out.
"""

from __future__ import annotations

import torch
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb


def tiny_llama(dtype=torch.float64, layers=2, heads=2, kv_heads=2, hidden=64, seed=0, vocab=300):
    """A random LlamaForCausalLM on transformers' eager attention."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=8192,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg).to(dtype).eval()


def fp64_cos_sin(rotary, positions, dtype):
    freqs = positions.double()[..., None] * rotary.inv_freq.double()
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


@torch.no_grad()
def layer_inputs(model, ids, shift, fp64_angles=False):
    """[(pre-RoPE q, k, cos, sin)] per layer, each [1, H, L, D] / [1, L, D], from an eager forward."""
    positions = torch.arange(shift, shift + ids.shape[1])[None]
    inner = model.model
    handle = None
    if fp64_angles:
        handle = inner.rotary_emb.register_forward_hook(lambda m, a, o: fp64_cos_sin(m, positions, o[0].dtype))
    # transformers' eager softmax is float32 even in a float64 model; its sdpa stays float64.
    if model.dtype == torch.float64:
        model.set_attn_implementation("sdpa")
    try:
        out = inner(input_ids=ids, position_ids=positions, output_hidden_states=True, use_cache=False)
        cos, sin = inner.rotary_emb(out.hidden_states[0], positions)
    finally:
        model.set_attn_implementation("eager")
        if handle is not None:
            handle.remove()
    result = []
    for layer, hidden in zip(inner.layers, out.hidden_states):
        attn = layer.self_attn
        h = layer.input_layernorm(hidden)
        q = attn.q_proj(h).view(1, ids.shape[1], -1, attn.head_dim).transpose(1, 2)
        k = attn.k_proj(h).view(1, ids.shape[1], -1, attn.head_dim).transpose(1, 2)
        result.append((q, k, cos, sin))
    return result


def full_logits(q, k, scaling, dtype):
    """[H, L, L] float64 logits q·kᵀ·scaling computed in `dtype` (GQA keys repeated)."""
    q, k = q[0].to(dtype), k[0].to(dtype)
    k = k.repeat_interleave(q.shape[0] // k.shape[0], dim=0)
    return (torch.matmul(q, k.transpose(1, 2)) * scaling).double()


def probabilities(a):
    L = a.shape[-1]
    mask = torch.ones(L, L, dtype=torch.bool).triu(1)
    return torch.softmax(a.masked_fill(mask, float("-inf")), dim=-1)


def metrics(logits1, logits2):
    """(D, per-token [L], D_logit) from lists of per-layer full logits for the two shifts."""
    L = logits1[0].shape[-1]
    n = torch.tensor([1.0 / (L - j) for j in range(L)], dtype=torch.float64)  # [1/L, …, 1]
    per_token = torch.zeros(L, dtype=torch.float64)
    d_logit = 0.0
    for a1, a2 in zip(logits1, logits2):
        diff = (probabilities(a1) - probabilities(a2)).abs()  # [H, i, j]
        per_token += n * diff.sum(dim=(0, 1))
        d_logit += (a1[:, :, 0] - a2[:, :, 0]).abs().sum().item()
    return per_token.sum().item(), per_token, d_logit / L


def model_metrics(model, ids, shift1, shift2, product_dtype, fp64_angles=False):
    """Eq. 4 / per-token / Eq. 5 for a model run, post-RoPE q/k as transformers computes them."""
    scaling = model.model.layers[0].self_attn.scaling

    def all_logits(shift):
        out = []
        for q, k, cos, sin in layer_inputs(model, ids, shift, fp64_angles):
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
            out.append(full_logits(q, k, scaling, product_dtype))
        return out

    return metrics(all_logits(shift1), all_logits(shift2))
