"""The model side: where a model comes from (sources: checkpoints, GGUF, packaged, served), how it
runs (runners: transformers, vLLM, OpenAI-compatible servers), its tokenizer, and the judge model.
It imports only the foundation (harness.core)."""
