"""kill -9 of the trainer or of its follower at random moments, then the same `harness train
--follow-eval` command again until it finishes: nothing lost, no sample stored twice, and the final
records and results equal those of an uninterrupted run (timings aside).

Both runs live in their own folder under the same relative names (run/, out/, corpus.jsonl), so their
records name the same paths. The moments are drawn from a seeded generator as points of progress (the
checkpoints written plus the records stored) and a delay after them, so on a loaded machine as on a
quiet one the kills land while training writes checkpoints and while the follower stores records."""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import threading
import time

import pytest

from .helpers import EVAL_FLAGS, by_key, harness_cmd, records, train_argv

pytestmark = pytest.mark.slow

KILLS = 4


def _command():
    flags = shlex.join([*EVAL_FLAGS, "--out", "out", "--follow-poll", "0.2"])
    return harness_cmd(*train_argv("run", "corpus.jsonl", "--save-state-every", "1", steps=4, keep_last=3),
                       "--follow-eval", flags)  # fmt: skip


class _Attempt:
    """One start of the command; its output read in a thread (the follower's pid is in it)."""

    def __init__(self, cwd):
        self.proc = subprocess.Popen(
            _command(), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def follower_pid(self) -> int | None:
        found = [int(m.group(1)) for x in self.lines if (m := re.search(r"follower started \(pid (\d+)\)", x))]
        return found[-1] if found else None

    def finish(self, timeout=900) -> int:
        code = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=30)
        return code


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_gone(pids, timeout=600):
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.5)
    for p in pids:  # an orphan follower that has not noticed yet: the test's own cleanup
        if _alive(p):
            os.kill(p, signal.SIGKILL)


def _progress(root) -> int:
    """Checkpoints written (complete or not) plus records stored so far."""
    ckpts = len(list((root / "run").glob("ckpt-*"))) if (root / "run").is_dir() else 0
    store = root / "out" / "samples.jsonl"
    return ckpts + (max(0, store.read_text().count("\n") - 1) if store.exists() else 0)


def _setup(root, corpus):
    root.mkdir()
    shutil.copy(corpus, root / "corpus.jsonl")
    return root


def test_kill_at_random_moments_loses_nothing(tmp_path, corpus):
    calm = _setup(tmp_path / "calm", corpus)
    first = _Attempt(calm)
    assert first.finish() == 0, "".join(first.lines)
    _wait_gone([p for p in [first.follower_pid()] if p])

    killed = _setup(tmp_path / "killed", corpus)
    rng = random.Random(47)
    followers: list[int] = []
    moments = []
    targets = ["trainer", "follower"] * (KILLS // 2)
    rng.shuffle(targets)
    for target in targets:
        attempt = _Attempt(killed)
        want = _progress(killed) + rng.randint(0, 2)
        while (_progress(killed) < want or attempt.follower_pid() is None) and attempt.proc.poll() is None:
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 1.5))
        pid = attempt.follower_pid()
        if pid is not None:
            followers.append(pid)
        victim = pid if target == "follower" else attempt.proc.pid
        if attempt.proc.poll() is None and victim is not None and _alive(victim):
            os.kill(victim, signal.SIGKILL)
            moments.append((target, _progress(killed)))
        attempt.finish()  # a killed follower never stops training: the trainer goes on to its end
    assert {t for t, _ in moments} == {"trainer", "follower"} and len({p for _, p in moments}) > 1, moments
    last = _Attempt(killed)
    assert last.finish() == 0, "".join(last.lines)
    _wait_gone(followers + [p for p in [last.follower_pid()] if p])

    expected, got = by_key(records(calm / "out")), by_key(records(killed / "out"))  # none stored twice
    kept = {r["checkpoint"]["fingerprint"] for r in records(calm / "out")}
    assert {k: v for k, v in got.items() if k[0] in kept} == expected  # nothing lost, nothing different
    a, b = (json.loads((d / "out" / "results.json").read_text()) for d in (calm, killed))
    assert a["suites"] == b["suites"]
    assert sorted(p.name for p in (killed / "run").glob("ckpt-*")) == ["ckpt-2", "ckpt-3", "ckpt-4"]
