#!/usr/bin/env bash
# Reproduces assets/demo-base, the short-window base model `harness demo` continues to a 2K window.
#
#   bash scripts/pretrain_demo_base.sh [WORK_DIR]      # default runs/demo-base-pretrain; about 45 min on 2 cores
#   INSTALL=1 bash scripts/pretrain_demo_base.sh       # then copy the result over assets/demo-base
#
# All the project's own code: the tokenizer and random initial weights (training/demo_base.py), the
# corpora (training/demo_corpus.py with seeds 2, 1 and 4; the demo's continuation corpus uses seed 3,
# RULER's samples come from their own generators and key spaces, so no document repeats an
# evaluation sample), and `harness train --mode intradoc` in three stages (constant learning rate
# after warmup, so a stage's weights at step N do not depend on its --steps):
#   1. window 512, mostly `repeat` documents (a random string written 2-4 times): grows the
#      induction heads (measured: loss on the later copies 4.2 at step 500, 0.35 at step 600);
#   2. window 512, the mixed corpus (facts in noise, dense facts, variable chains, copies,
#      repeats): puts them to work on RULER-style questions;
#   3. window 1024, longer documents (6-36 filler lines): recall across the whole 1K window.
# assets/demo-base/PROVENANCE.md records the corpora's sha256 and what the shipped model scores.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-runs/demo-base-pretrain}
STAGE1_STEPS=${STAGE1_STEPS:-600}  # copying appeared between steps 500 and 600
STAGE2_STEPS=${STAGE2_STEPS:-400}
STAGE3_STEPS=${STAGE3_STEPS:-1000}
PY=${PY:-.venv/bin/python}
HARNESS=${HARNESS:-.venv/bin/harness}
COMMON=(--mode intradoc --weight-decay 0 --keep-last 0 --seed 0 --no-progress)

mkdir -p "$WORK"
"$PY" -m training.demo_base "$WORK/init" --layers 2 --hidden 128 --heads 8 --max-len 8192 --seed 0
"$PY" -m training.demo_corpus "$WORK/repeat.jsonl" --num-docs 60000 --seed 2 --max-lines 12 \
  --short-share 0.5 --short-lines 3 --copy-share 0.05 --repeat-share 0.9            # sha256 e78a38f96ed8b1fc
"$PY" -m training.demo_corpus "$WORK/mixed.jsonl" --num-docs 60000 --seed 1 --max-lines 12 \
  --short-share 0.5 --short-lines 3 --copy-share 0.1 --repeat-share 0.4             # sha256 79e9b1668c45a3b8
"$PY" -m training.demo_corpus "$WORK/long.jsonl" --num-docs 16000 --seed 4 --max-lines 36 --min-lines 6 \
  --short-share 0.2 --short-lines 3 --copy-share 0.05 --repeat-share 0.15           # sha256 96fd8fb163b64bfb
"$HARNESS" train --model "$WORK/init" --data "$WORK/repeat.jsonl" --out "$WORK/stage1" "${COMMON[@]}" \
  --window 512 --batch-size 8 --lr 2e-3 --warmup 100 --steps "$STAGE1_STEPS" --save-every "$STAGE1_STEPS"
"$HARNESS" train --model "$WORK/stage1/ckpt-$STAGE1_STEPS" --data "$WORK/mixed.jsonl" --out "$WORK/stage2" "${COMMON[@]}" \
  --window 512 --batch-size 8 --lr 2e-3 --steps "$STAGE2_STEPS" --save-every "$STAGE2_STEPS"
"$HARNESS" train --model "$WORK/stage2/ckpt-$STAGE2_STEPS" --data "$WORK/long.jsonl" --out "$WORK/stage3" "${COMMON[@]}" \
  --window 1024 --batch-size 4 --lr 1e-3 --warmup 20 --steps "$STAGE3_STEPS" --save-every "$STAGE3_STEPS"
RESULT="$WORK/stage3/ckpt-$STAGE3_STEPS"
echo "base model: $RESULT"
if [[ "${INSTALL:-0}" == 1 ]]; then
  cp "$RESULT"/{config.json,generation_config.json,model.safetensors,tokenizer.json,tokenizer_config.json,harness_training.json} assets/demo-base/
  echo "copied into assets/demo-base"
fi
