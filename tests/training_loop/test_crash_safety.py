"""Crash safety of `harness train` around its files: checkpoint replacement killed between its
renames, checkpoint completeness as `harness eval` sees it, one writer per run directory, a full
disk, an unreadable newest state, and what a resumed or finished run prints."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.cli import main

REPO = Path(__file__).resolve().parents[2]


def _args(model, data, out, *extra) -> list[str]:
    return [
        "train",
        "--model",
        str(model),
        "--data",
        str(data),
        "--out",
        str(out),
        "--mode",
        "anchor",
        "--window",
        "64",
        "--dtype",
        "fp32",
        "--max-docs",
        "20",
        "--lr",
        "1e-3",
        "--no-progress",
        *extra,
    ]


def _leftovers(root: Path) -> list[str]:
    """Temporary or set-aside files/directories anywhere under root."""
    found = []
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            if name.startswith((".tmp-", ".old-")) or name.endswith(".tmp") or name == ".harness-train.lock":
                found.append(os.path.relpath(os.path.join(dirpath, name), root))
    return found


def _select(spec: str) -> list[int]:
    from harness.models.checkpoints import check_same_tokenizer
    from harness.models.sources import select_checkpoints

    ckpts = select_checkpoints(spec)
    check_same_tokenizer(ckpts)  # a half-deleted tokenizer used to surface as "different tokenizers"
    return [c.step for c in ckpts]


# ---------------------------------------------------------------- atomic replacement


@pytest.mark.parametrize("point", ["aside", "renamed"])
def test_sigkill_during_checkpoint_replacement(point, tiny_llama_dir, corpus_path, tmp_path, capsys):
    """Kill the writer (SIGKILL) between the renames that replace ckpt-3: eval then selects only
    complete checkpoints, and the same command afterwards repairs and finishes the run."""
    out = tmp_path / "run"
    common = ["--save-every", "1", "--keep-last", "3", "--save-state-every", "1"]
    assert main(_args(tiny_llama_dir, corpus_path, out, "--steps", "3", *common)) == 0
    # Resume from step 2, so the next run rewrites ckpt-3 (the re-run that replaces a checkpoint).
    shutil.rmtree(out / "state" / "step-3")
    (out / "state" / "latest").write_text("step-2\n")
    old_weights = (out / "ckpt-3" / "model.safetensors").read_bytes()

    script = textwrap.dedent(
        f"""
        import os, signal, sys
        from training import checkpointing
        def hook(point, final):
            if point == {point!r} and final.name == "ckpt-3":
                os.kill(os.getpid(), signal.SIGKILL)
        checkpointing._REPLACE_HOOK = hook
        from harness.cli import main
        sys.exit(main(sys.argv[1:]))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-c", script, *_args(tiny_llama_dir, corpus_path, out, "--steps", "3", *common)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]

    if point == "aside":  # old ckpt-3 renamed aside, the new one not yet in place
        assert not (out / "ckpt-3").exists() and (out / ".old-ckpt-3").is_dir() and (out / ".tmp-ckpt-3").is_dir()
        assert _select(f"{out}/ckpt-<1..3>") == [1, 2]
    else:  # new ckpt-3 in place, the old one not yet deleted
        assert (out / ".old-ckpt-3").is_dir()
        assert _select(f"{out}/ckpt-<1..3>") == [1, 2, 3]
    assert _select(f"{out}/ckpt-*") == _select(f"{out}/ckpt-<1..3>")

    # The same command repairs the replacement and finishes: three complete checkpoints, no leftovers.
    capsys.readouterr()
    assert main(_args(tiny_llama_dir, corpus_path, out, "--steps", "3", *common)) == 0
    assert _select(f"{out}/ckpt-<1..3>") == [1, 2, 3]
    assert _leftovers(out) == []
    assert (out / "ckpt-3" / "harness_complete.json").is_file()
    assert len((out / "ckpt-3" / "model.safetensors").read_bytes()) == len(old_weights)


def test_exception_between_renames_leaves_no_half_checkpoint(tiny_llama_dir, run_job, tmp_path, monkeypatch):
    """The same interruption as an exception (in-process): the old checkpoint is never half deleted."""
    from training import checkpointing

    from .helpers import small_job

    out = tmp_path / "run"
    job = small_job(tiny_llama_dir, out, steps=3, save_every=1, keep_last=3, save_state_every=2)
    run_job(job)  # ckpt-1..3, states 2 and 3
    shutil.rmtree(out / "state" / "step-3")
    (out / "state" / "latest").write_text("step-2\n")

    def boom(point, final):
        if point == "aside":
            raise KeyboardInterrupt  # not an Exception: nothing on the way may swallow it

    monkeypatch.setattr(checkpointing, "_REPLACE_HOOK", boom)
    with pytest.raises(KeyboardInterrupt):
        run_job(job)
    assert _select(f"{out}/ckpt-*") == [1, 2]
    assert sorted(p.name for p in out.iterdir() if "ckpt" in p.name) == [".old-ckpt-3", "ckpt-1", "ckpt-2"]
    monkeypatch.setattr(checkpointing, "_REPLACE_HOOK", None)
    checkpointing.recover(out)  # no complete new copy: the old ckpt-3 goes back
    assert _select(f"{out}/ckpt-*") == [1, 2, 3]


def test_eval_selects_only_complete_checkpoints(tiny_llama_dir, run_job, tmp_path, capsys):
    """Completeness as harness eval sees it: markers, checkpoints from earlier versions, plain HF dirs."""
    from harness.models.checkpoints import COMPLETE_FILE, IN_PROGRESS_FILE

    from .helpers import small_job

    run = tmp_path / "run"
    run_job(small_job(tiny_llama_dir, run, steps=1, save_every=1, keep_last=1))
    good = run / "ckpt-1"
    assert (good / COMPLETE_FILE).is_file() and not (good / IN_PROGRESS_FILE).exists()

    def variant(step: int, *, drop=(), marker=True, in_progress=False) -> None:
        d = run / f"ckpt-{step}"
        shutil.copytree(good, d)
        if not marker:  # as written by earlier versions of the project
            (d / COMPLETE_FILE).unlink()
        if in_progress:
            (d / IN_PROGRESS_FILE).write_text("")
        for name in drop:
            (d / name).unlink()

    variant(2, marker=False)  # earlier version, complete: accepted
    variant(3, marker=False, drop=["model.safetensors"])  # earlier version, half deleted
    variant(4, marker=False, drop=["tokenizer.json"])  # earlier version, tokenizer half deleted
    variant(5, in_progress=True)  # leftover in-progress marker
    variant(6, drop=["model.safetensors"])  # listed by its marker but gone
    variant(7, drop=["tokenizer.json"])
    capsys.readouterr()
    assert _select(f"{run}/ckpt-*") == [1, 2]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 5 and all(line.startswith("warning: skipping incomplete checkpoint") for line in err), err
    assert sum("ckpt-3 (its weights are missing)" in line for line in err) == 1
    assert sum(f"ckpt-5 ({IN_PROGRESS_FILE}" in line for line in err) == 1
    # A plain Hugging Face model directory (no training metadata) stays selectable.
    assert _select(str(tiny_llama_dir)) == [None]
    from harness.core.errors import UserError
    from harness.models.sources import select_checkpoints

    with pytest.raises(UserError, match="incomplete"):
        select_checkpoints(f"{run}/ckpt-<3..7>")
    # --last counts complete checkpoints only.
    assert [c.step for c in select_checkpoints(f"{run}/ckpt-*", last=1)] == [2]


# ---------------------------------------------------------------- one writer per run directory


def test_second_train_process_is_refused_and_stale_lock_reclaimed(tiny_llama_dir, corpus_path, tmp_path, capfd):
    import fcntl

    from training.runlock import LOCK_NAME

    out = tmp_path / "run"
    out.mkdir()
    # A live holder in another process: the second writer stops at once, naming it.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time; from training.runlock import RunLock; RunLock(sys.argv[1]).acquire(); "
                "print('locked', flush=True); time.sleep(600)"
            ),
            str(out),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        capfd.readouterr()
        assert main(_args(tiny_llama_dir, corpus_path, out, "--steps", "1")) == 2
        err = capfd.readouterr().err.strip()
        assert err.startswith("error: ") and "\n" not in err, err
        assert f"pid {holder.pid} on host {socket.gethostname()}" in err, err
        assert sorted(os.listdir(out)) == [LOCK_NAME]  # nothing written by the refused run
    finally:
        holder.kill()
        holder.wait()

    # Killed holder: the kernel dropped its flock; the leftover file is simply taken over.
    assert main(_args(tiny_llama_dir, corpus_path, out, "--steps", "1")) == 0
    assert not (out / LOCK_NAME).exists()

    # Still locked, but by a process of this host that no longer exists (a leaked descriptor): reclaimed.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    fd = os.open(out / LOCK_NAME, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, json.dumps({"pid": dead.pid, "host": socket.gethostname(), "started": "then"}).encode())
        capfd.readouterr()
        assert main(_args(tiny_llama_dir, corpus_path, out, "--steps", "2")) == 0
        assert f"reclaimed the stale lock {out / LOCK_NAME} of pid {dead.pid}" in capfd.readouterr().out
    finally:
        os.close(fd)


# ---------------------------------------------------------------- full disk


def _mount_tmpfs(path: Path, size: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root")
    path.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, check=False
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode().strip()[:200]}")


def _fill(mnt: Path, leave: int) -> None:
    free = shutil.disk_usage(mnt).free
    with open(mnt / "filler", "wb") as f:
        f.write(b"\0" * max(free - leave, 0))


def _weight_bytes(model_dir: Path) -> int:
    from safetensors.torch import load_file

    return sum(t.numel() * t.element_size() for t in load_file(model_dir / "model.safetensors").values())


@pytest.mark.parametrize("leave", ["weights+32KB", "100KB"])
def test_disk_full_is_one_line_and_keeps_finished_work(
    leave, tiny_llama_dir, corpus_path, tmp_path, capfd, monkeypatch
):
    """On a small tmpfs: a checkpoint write that runs out of space mid-way (weights fit, the
    tokenizer does not), or one whose weights cannot fit at all, ends with one line naming the
    checkpoint and the space needed; finished checkpoints and states are kept, no temp files left."""
    from training import checkpointing

    mnt = tmp_path / "mnt"
    # 32 MB, not 3: the finished first step must fit (ckpt ~2.6 MB, state with AdamW moments ~7 MB),
    # then a filler file leaves exactly the room each case needs.
    _mount_tmpfs(mnt, "32m")
    try:
        out = mnt / "run"
        common = ["--save-every", "1", "--keep-last", "2"]
        assert main(_args(tiny_llama_dir, corpus_path, out, "--steps", "1", *common)) == 0
        first = sorted((out / "ckpt-1").iterdir())
        _fill(mnt, (_weight_bytes(Path(tiny_llama_dir)) + 32 * 1024) if leave.startswith("weights") else 100 * 1024)
        capfd.readouterr()
        failed_writes = []  # which path: a write that failed (weights fit) or the check before writing
        real = checkpointing._is_disk_full
        monkeypatch.setattr(checkpointing, "_is_disk_full", lambda e, w: failed_writes.append(e) or real(e, w))
        assert main(_args(tiny_llama_dir, corpus_path, out, "--steps", "2", *common)) == 2
        assert len(failed_writes) == (1 if leave.startswith("weights") else 0)
        err = capfd.readouterr().err.strip()
        assert err.count("\n") == 0 and err.startswith(
            f"error: disk full writing {out / 'ckpt-2'}: it needs at least "
        ), err
        assert "Traceback" not in err
        assert _leftovers(out) == []
        assert not (out / "ckpt-2").exists()
        assert sorted((out / "ckpt-1").iterdir()) == first and _select(f"{out}/ckpt-*") == [1]
        assert (out / "state" / "latest").read_text().strip() == "step-1"
        # Space freed: the same command resumes and finishes.
        (mnt / "filler").unlink()
        assert main(_args(tiny_llama_dir, corpus_path, out, "--steps", "2", *common)) == 0
        assert _select(f"{out}/ckpt-*") == [1, 2] and _leftovers(out) == []
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


# ---------------------------------------------------------------- resume messages and state fallback


def test_resume_prints_its_state_and_finished_run_its_last_loss(tiny_llama_dir, corpus_path, tmp_path, capsys):
    from training.logging import read_log

    out = tmp_path / "run"
    common = ["--save-every", "10", "--save-state-every", "1"]
    assert main(_args(tiny_llama_dir, corpus_path, out, "--steps", "2", *common)) == 0
    capsys.readouterr()
    assert main(_args(tiny_llama_dir, corpus_path, out, "--steps", "3", *common)) == 0
    assert f"resumed from step 2 (state {out / 'state' / 'step-2'})" in capsys.readouterr().out
    last = read_log(out / "log.jsonl")[-1]
    assert last["step"] == 3
    assert main(_args(tiny_llama_dir, corpus_path, out, "--steps", "3", *common)) == 0
    printed = capsys.readouterr().out
    assert "already trained to step 3" in printed and f"(last loss {last['loss']:.4f})" in printed, printed
    assert "nan" not in printed


def test_truncated_newest_state_falls_back_to_the_previous_one(tiny_llama_dir, corpus_path, tmp_path, capsys):
    """A damaged newest state.pt: resume from the previous kept state, say so, and reproduce the
    uninterrupted curve (the steps after it are recomputed)."""
    from training.logging import read_log

    common = ["--save-every", "10", "--save-state-every", "1"]
    assert main(_args(tiny_llama_dir, corpus_path, tmp_path / "clean", "--steps", "3", *common)) == 0
    out = tmp_path / "run"
    assert main(_args(tiny_llama_dir, corpus_path, out, "--steps", "2", *common)) == 0
    state = out / "state" / "step-2" / "state.pt"
    state.write_bytes(state.read_bytes()[:4096])
    capsys.readouterr()
    assert main(_args(tiny_llama_dir, corpus_path, out, "--steps", "3", *common)) == 0
    captured = capsys.readouterr()
    assert f"warning: {state} is unreadable (" in captured.err
    assert f"resuming from the previous kept state {out / 'state' / 'step-1'}" in captured.err
    assert f"resumed from step 1 (state {out / 'state' / 'step-1'})" in captured.out
    got = [r["loss"] for r in read_log(out / "log.jsonl")]
    want = [r["loss"] for r in read_log(tmp_path / "clean" / "log.jsonl")]
    assert got == pytest.approx(want, rel=1e-9, abs=0)
    assert sorted(p.name for p in (out / "state").iterdir()) == ["latest", "step-2", "step-3"]
