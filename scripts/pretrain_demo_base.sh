#!/usr/bin/env bash
# The recipe under test for assets/demo-base, the short-window base model `harness demo` continues
# (README, limitations: at the step counts tried so far it does not retrieve yet).
#
#   bash scripts/pretrain_demo_base.sh [WORK_DIR]      # default runs/demo-base-pretrain
#   STAGE1_STEPS=800 STEPS=3000 bash scripts/pretrain_demo_base.sh
#
# All the project's own code: the tokenizer and random initial weights (training/demo_base.py), the
# corpora (training/demo_corpus.py; seeds 1 and 2 here, the demo's continuation corpus uses seed 3,
# and RULER's samples come from their own generators, so no document repeats an evaluation sample),
# and `harness train --mode intradoc` at a 512-token window in two stages:
#   1. mostly `repeat` documents (a random string written 2-4 times): grows the induction heads
#      (measured: loss on the later copies 4.2 at step 500, 0.35 at step 600);
#   2. the mixed corpus (facts in noise, dense facts, variable chains, copies, repeats): puts them
#      to work on RULER-style questions.
# Each step is 8 x 512 tokens, about 1-1.7 s on 2 CPU cores.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${1:-runs/demo-base-pretrain}
STAGE1_STEPS=${STAGE1_STEPS:-800}  # copying appeared between steps 500 and 600 (README)
STEPS=${STEPS:-3000}
PY=${PY:-.venv/bin/python}
HARNESS=${HARNESS:-.venv/bin/harness}
TRAIN=(--mode intradoc --window 512 --batch-size 8 --lr 2e-3 --weight-decay 0 --save-every 250 --keep-last 0 --seed 0)

mkdir -p "$WORK"
"$PY" -m training.demo_base "$WORK/init" --layers 2 --hidden 128 --heads 8 --max-len 8192 --seed 0
"$PY" -m training.demo_corpus "$WORK/repeat.jsonl" --num-docs 60000 --seed 2 --max-lines 12 \
  --short-share 0.5 --short-lines 3 --copy-share 0.05 --repeat-share 0.9
"$PY" -m training.demo_corpus "$WORK/mixed.jsonl" --num-docs 150000 --seed 1 --max-lines 12 \
  --short-share 0.5 --short-lines 3 --copy-share 0.1 --repeat-share 0.4
"$HARNESS" train --model "$WORK/init" --data "$WORK/repeat.jsonl" --out "$WORK/stage1" \
  --steps "$STAGE1_STEPS" --warmup 100 "${TRAIN[@]}"
"$HARNESS" train --model "$WORK/stage1/ckpt-$STAGE1_STEPS" --data "$WORK/mixed.jsonl" --out "$WORK/stage2" \
  --steps "$STEPS" "${TRAIN[@]}"
echo "candidate base model: $WORK/stage2/ckpt-$STEPS"
