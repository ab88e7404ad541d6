"""The options of `harness eval`, one function per option group; `harness doctor` takes the same
(harness/commands/doctor.py), and `harness demo --eval-dtype` offers the same model dtypes.

Each function adds its flags to the argument group it is given; harness/commands/eval.py names the
groups and calls them in the order --help lists them.
"""

from __future__ import annotations

# Model dtypes a runner loads a checkpoint in (auto: the checkpoint's own).
MODEL_DTYPES = ("auto", "bfloat16", "float16", "float32")


def add_target_options(g) -> None:
    """What to evaluate: the checkpoints, the tasks and lengths, the samples."""
    g.add_argument(
        "--ckpts",
        metavar="SPEC",
        help="checkpoints: path with <A..B> step range, glob, comma list, hub name, .gguf file, or a packaged "
        "model name (smollm2-135m-instruct)",
    )
    g.add_argument("--last", type=int, metavar="N", help="keep only the last N checkpoints by step")
    g.add_argument(
        "--embedded",
        action="store_true",
        help="build 5 tiny random checkpoints under runs/embedded/ (if absent) and evaluate them on "
        "RULER tasks needing no data at 1k,2k; other flags override",
    )
    g.add_argument("--suite", help="suite name (e.g. ruler, ruler-llama2)")
    g.add_argument("--tasks", metavar="A,B", help="comma list of tasks (instead of a suite)")
    g.add_argument("--exclude", metavar="A,B", help="tasks to leave out (listed as excluded in the results)")
    g.add_argument(
        "--lengths",
        metavar="SPEC",
        help="lengths, e.g. 4k-128k or 1k,4k (default: 4k-128k; a published suite under --protocol reference: "
        "its reference's own grid)",
    )
    g.add_argument(
        "--protocol",
        choices=["reference", "exact-length", "completion"],
        default="reference",
        help="inputs of the published suites (LongBench v1/v2, HELMET, BABILong, NoLiMa): reference (default) "
        "shows the model what the reference's own pipeline shows it (items, per-length files, length unit, "
        "truncation budget, per-task chat policy, sample count), so scores stand beside published tables; "
        "exact-length fills each length in the evaluated model's tokens, to compare across tokenizers; "
        "completion renders a chat suite's conversation as plain text for base checkpoints (MRCR). "
        "Recorded in every record and results.json",
    )
    g.add_argument(
        "--samples",
        type=int,
        metavar="N",
        help="samples per task and length, for every task (default: 500, RULER's, per length-controlled "
        "task and length; every item of LongBench, MMLU and HellaSwag)",
    )
    g.add_argument("--seed", type=int, default=42, help="sample generation seed (default 42)")


def add_runner_options(g) -> None:
    """How the model runs: backend, dtype, batch size, the set-up checks, prefix reuse, and the
    context and RoPE overrides."""
    from harness.models.runners.registry import backend_help, backend_names

    g.add_argument("--backend", choices=backend_names(), default="hf", help=backend_help())
    g.add_argument(
        "--dtype",
        choices=MODEL_DTYPES,
        default="auto",
        help="model dtype (default: the checkpoint's)",
    )
    g.add_argument(
        "--batch-size",
        type=int,
        default=8,
        help="samples stored per write; loglikelihood rows per batch (hf generation runs one prompt at a time) (default 8)",
    )
    g.add_argument(
        "--no-doctor",
        action="store_true",
        help="skip the cheap set-up checks eval runs first (harness doctor's: the tokenizer's EOS and vocabulary); "
        "recorded in results.json",
    )
    g.add_argument(
        "--no-prefix-reuse",
        action="store_true",
        help="compute every prompt in full: no shared-prefix KV reuse (hf) or prefix caching (vllm); "
        "outputs are the same either way, only slower",
    )
    g.add_argument(
        "--max-model-len", type=int, metavar="N", help="context to run with (default: config max_position_embeddings)"
    )
    g.add_argument(
        "--max-length",
        type=int,
        metavar="N",
        help="the budget of fixed datasets cut to fit (LongBench v1/v2). LongBench v1 under --protocol reference "
        "(its default): pred.py's prompt budget alone, each prompt middle-truncated to N (default: pred.py's "
        "1000 x context/1024 - 500, 3500 on a 4K model); LongBench v2 and --protocol exact-length: prompt + "
        "generation, the prompt cut to N minus the task's tokens to generate (and a chat template's) "
        "(default: the context; v2's reference also caps the prompt at 120000)",
    )
    g.add_argument("--rope-theta", type=float, metavar="THETA", help="override the config's rope theta (recorded)")
    g.add_argument(
        "--rope-scaling", metavar="JSON", help='override rope scaling, e.g. \'{"rope_type": "yarn", "factor": 4.0}\''
    )


def add_parallel_options(g) -> None:
    """How many engines and GPUs: tensor and data parallelism, Ray, sample sharding, device map."""
    g.add_argument("--tensor-parallel-size", type=int, default=1, metavar="N", help="GPUs per engine (vLLM)")
    g.add_argument(
        "--data-parallel", type=int, default=1, metavar="N", help="evaluate N checkpoints at once (one engine each)"
    )
    g.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="spread --data-parallel workers over a Ray cluster (needs ray): auto, HOST:6379, or local (start one here)",
    )
    g.add_argument(
        "--shard-samples",
        action="store_true",
        help="split each checkpoint x task x length into sample ranges so engines share a checkpoint "
        "(automatic when fewer checkpoints than --data-parallel)",
    )
    g.add_argument(
        "--device-map",
        choices=["auto"],
        help="hf backend: spread one model over the worker's GPUs (--tensor-parallel-size of them per worker)",
    )


def add_chat_option(g) -> None:
    """The chat template (the runner group's last flag)."""
    g.add_argument(
        "--chat-template",
        "--chat",
        action="store_true",
        help="wrap prompts in the tokenizer's chat template (off: base-model prompting); with --backend openai: "
        "the chat route, the server's template (its tokens count inside each length)",
    )


def add_served_options(g) -> None:
    """A served model (--backend openai): the server, the model's name there, its tokenizer, requests."""
    g.add_argument("--base-url", metavar="URL", help="the server's API root, e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--model", metavar="NAME", help="the name the server serves the model under (see URL/models)")
    g.add_argument(
        "--tokenizer",
        metavar="DIR_OR_HUB",
        help="the served model's tokenizer, to build and count prompts locally (default: --model)",
    )
    g.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="environment variable holding the API key (default: OPENAI_API_KEY when set, else no key)",
    )
    # default None: given with a local backend, which would ignore them, they are an error
    g.add_argument("--concurrency", type=int, metavar="N", help="requests in flight (default 8)")
    g.add_argument("--request-timeout", type=float, metavar="S", help="seconds per request (default 600)")
    g.add_argument(
        "--retries",
        type=int,
        metavar="N",
        help="tries again after a 429, 5xx or connection error, waiting 0.5 s, 1 s, 2 s, ... (default 5)",
    )


def add_judge_options(g) -> None:
    """The judge model of the judged HELMET tasks."""
    g.add_argument("--judge-base-url", metavar="URL", help="the judge server's API root, e.g. http://127.0.0.1:8001/v1")
    g.add_argument("--judge-model", metavar="NAME", help="the name the judge server serves its model under")
    g.add_argument(
        "--judge-api-key-env",
        metavar="VAR",
        help="environment variable holding the judge's API key (default: OPENAI_API_KEY when set, else no key)",
    )


def add_prompt_options(g) -> None:
    """Prompt and answer handling for instruct and reasoning models."""
    g.add_argument(
        "--no-answer-prefix",
        action="store_true",
        help="end the prompt with the task input, without the answer prefix (e.g. RULER's ' Answer:')",
    )
    g.add_argument(
        "--max-new-tokens",
        metavar="N|TASK=N,...",
        help="tokens to generate instead of each task's own, for every task (N) or some (qa_1=1024,vt=512)",
    )
    g.add_argument(
        "--max-thinking-tokens",
        type=int,
        metavar="N",
        help="a reasoning model's thinking budget apart from the answer's: it may think N tokens, then the thought "
        "is closed and the answer keeps the task's budget (or --max-new-tokens); the answer is what follows "
        '</think> (docs/served-models.md, "Thinking budgets")',
    )
    g.add_argument("--system-prompt", metavar="TEXT", help="a system turn before the task (needs --chat)")
    g.add_argument(
        "--strip-thinking",
        action="store_true",
        help="score the answer without <think>...</think> (the raw output is kept in the record)",
    )


def add_output_options(g) -> None:
    """Where results go, the effective-length threshold, the sample cache, progress bars."""
    g.add_argument("--name", help="run name (default: the checkpoints' parent folder)")
    g.add_argument("--out", metavar="DIR", help="store + results directory (default results/<name>); re-run to resume")
    g.add_argument("--threshold", type=float, help="effective-length threshold (default 85.6)")
    g.add_argument("--cache-dir", metavar="DIR", help="sample cache directory ('none' disables it)")
    g.add_argument("--no-progress", action="store_true", help="hide progress bars")
