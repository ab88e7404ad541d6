"""A tiny GGUF file written from a tiny Llama folder, for tests that need a GGUF transformers can load.

The layout is ggml's llama GGUF as llama.cpp's convert_hf_to_gguf.py writes it (facts of the format,
written here with the gguf package's GGUFWriter): tensors renamed token_embd / blk.N.attn_q / ...,
the q and k projections permuted from Hugging Face's rotate-half RoPE layout to ggml's interleaved
one (transformers undoes it on load), float32 tensors, and a "gpt2" (byte-level BPE) tokenizer:
tokens in id order, token types (1 normal, 3 control), merges as "a b" strings.
"""

from __future__ import annotations

import json
from pathlib import Path

_NAMES = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
}


def _permute(w, n_head: int):
    """llama.cpp's permute: rotate-half rows -> interleaved pairs, per head."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_tiny_gguf(folder: str | Path, out: str | Path, architecture: str = "llama", name: str = "tiny") -> Path:
    import gguf
    import numpy as np
    from safetensors.numpy import load_file

    folder, out = Path(folder), Path(out)
    config = json.loads((folder / "config.json").read_text())
    tok = json.loads((folder / "tokenizer.json").read_text())
    tok_cfg = json.loads((folder / "tokenizer_config.json").read_text())
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    hidden = config["hidden_size"]
    head_dim = config.get("head_dim") or hidden // heads
    theta = (config.get("rope_parameters") or {}).get("rope_theta") or config.get("rope_theta", 10000.0)

    w = gguf.GGUFWriter(str(out), arch=architecture)
    w.add_name(name)
    w.add_context_length(config["max_position_embeddings"])
    w.add_embedding_length(hidden)
    w.add_block_count(config["num_hidden_layers"])
    w.add_feed_forward_length(config["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_freq_base(float(theta))
    w.add_layer_norm_rms_eps(float(config["rms_norm_eps"]))
    w.add_rope_dimension_count(head_dim)
    w.add_vocab_size(config["vocab_size"])
    w.add_file_type(0)  # all float32

    vocab = tok["model"]["vocab"]
    added = {t["id"]: t["content"] for t in tok.get("added_tokens", [])}
    tokens = [None] * config["vocab_size"]
    for text, i in vocab.items():
        tokens[i] = text
    for i, text in added.items():
        tokens[i] = text
    assert all(t is not None for t in tokens), "every id needs a token"
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([3 if i in added else 1 for i in range(len(tokens))])
    w.add_token_merges(merges)
    ids = {t: i for i, t in enumerate(tokens)}
    w.add_bos_token_id(ids[tok_cfg["bos_token"]])
    w.add_eos_token_id(ids[tok_cfg["eos_token"]])
    w.add_pad_token_id(ids[tok_cfg["pad_token"]])
    w.add_add_bos_token(True)

    weights = load_file(str(folder / "model.safetensors"))
    for key, value in weights.items():
        arr = value.astype(np.float32)
        if key == "model.embed_tokens.weight":
            new = "token_embd.weight"
        elif key == "model.norm.weight":
            new = "output_norm.weight"
        elif key == "lm_head.weight":
            new = "output.weight"
        else:
            _, _, layer, rest = key.split(".", 3)
            part = rest.rsplit(".", 1)[0]
            if part == "self_attn.q_proj":
                arr = _permute(arr, heads)
            elif part == "self_attn.k_proj":
                arr = _permute(arr, kv_heads)
            new = f"blk.{layer}.{_NAMES[part]}.weight"
        w.add_tensor(new, np.ascontiguousarray(arr))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out
