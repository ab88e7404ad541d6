"""Server replies that are not answers (docs/failure-modes.md): a rate limit, a content filter. Each
stops `harness eval` with one line before anything is stored as a prediction; re-running resumes."""

from __future__ import annotations

from .conftest import records, served
from .servers import TinyServer

NIAH = ["--tasks", "niah_single_1", "--lengths", "1k"]


def test_rate_limited_requests_are_never_scored(tiny_llama_dir, run, tmp_path):
    """scaleapi/SWE-bench_Pro-os issue 78 (instructlab/eval issue 39): requests that hit the provider's
    rate limit (429) were scored as failures, 4.9% of a model's runs, 1.3 points of its score. Here
    429s are retried with back-off, then the run stops naming the status; no record is written."""
    out = tmp_path / "out"
    with TinyServer(str(tiny_llama_dir), fail=[429] * 20) as server:
        flags = [*served(server, tiny_llama_dir)[:-1], "1", *NIAH]  # --retries 1
        ev = run("eval", *flags, "--samples", "1", "--out", str(out))
    assert ev.code == 2 and "429" in ev.last_error and not records(out)
    with TinyServer(str(tiny_llama_dir)) as server:  # the same command once the server answers: resumed
        ev = run("eval", *served(server, tiny_llama_dir), *NIAH, "--samples", "1", "--out", str(out))
    assert ev.code == 0 and len(records(out)) == 1


def test_content_filter_is_not_an_empty_answer(tiny_llama_dir, run, tmp_path):
    """BerriAI/litellm issue 8953 (stanford-crfm/helm PR 3327 treats it "like an empty response"): a
    reply with finish_reason "content_filter" and no content. It is no prediction: the run stops."""

    def filtered(path, answer):
        if path == "/v1/completions":
            return {**answer, "choices": [{**answer["choices"][0], "text": "", "finish_reason": "content_filter"}]}
        return answer

    out = tmp_path / "out"
    with TinyServer(str(tiny_llama_dir), mangle=filtered) as server:
        ev = run("eval", *served(server, tiny_llama_dir), *NIAH, "--samples", "1", "--out", str(out))
    assert ev.code == 2 and "content_filter" in ev.last_error and not records(out)
