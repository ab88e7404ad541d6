"""Copying a checkpoint folder for tests that damage or extend it.

A plain module, not conftest: every tests/*/conftest.py is imported under the one name `conftest`, so
`from conftest import ...` inside a test body finds whichever folder's conftest was collected last.
"""

from __future__ import annotations

import os
import shutil


def copy_ckpt(src, dst, drop_tokenizer=False):
    shutil.copytree(src, dst)
    if drop_tokenizer:
        for f in os.listdir(dst):
            if f.startswith(("tokenizer", "special_tokens")):
                os.remove(os.path.join(dst, f))
    return dst
