"""benchmarks/parity_kit.py, the parity scripts' shared toolkit, without a reference or a server
(its recording proxy is exercised in test_realmodel_parity_scripts.py):

    pytest -q tests/benchmarks/test_parity_kit.py
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # as the parity scripts import it

import parity_kit as kit


def test_pins_are_written_whole_with_their_own_json_options(tmp_path):
    obj = {"b": ["é", 1.5, None], "a": {"c": "→"}}
    kit.write_json(tmp_path / "new" / "pins.json", obj)  # the folder is made
    assert (tmp_path / "new" / "pins.json").read_text(encoding="utf-8") == json.dumps(
        obj, ensure_ascii=False, indent=1
    ) + "\n"
    kit.write_json(tmp_path / "c.json", obj, ensure_ascii=True, indent=None, sort_keys=True, separators=(",", ":"))
    assert (tmp_path / "c.json").read_bytes() == b'{"a":{"c":"\\u2192"},"b":["\\u00e9",1.5,null]}\n'
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp file left
    assert kit.read_json(tmp_path / "c.json") == obj
    (tmp_path / "bad.json").write_text("{")
    assert kit.read_json(tmp_path / "bad.json") is None and kit.read_json(tmp_path / "none.json") is None


def test_exit_codes(capsys):
    assert kit.mismatch_status({"prompts_compared": 9, "prompt_mismatches": 0, "score_mismatches": 0}) == 0
    assert kit.mismatch_status({"prompts_compared": 9, "prompt_mismatches": 0, "score_mismatches": 2}) == 1

    def bad(args):
        raise kit.BenchError(f"{args} is not a checkout: pass --reference DIR")

    assert kit.exit_code(bad, "/x") == 2
    assert capsys.readouterr().err == "error: /x is not a checkout: pass --reference DIR\n"
    assert kit.exit_code(lambda args: args, 1) == 1


def test_table_cells():
    assert kit.sha("a") == "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"
    assert kit.short("a|b\n") == "a\\|b\\n" and kit.short(None) == "—" and kit.short("x" * 50) == "x" * 39 + "…"
    assert kit.short("a|b", table=False) == "a|b" and len(kit.short("y" * 60, 48, table=False)) == 48
    assert kit.fmt(None) == "—" and kit.fmt(1.234) == "1.23" and kit.fmt(-0.5, "+.1f") == "-0.5"


def test_checkout_files_and_stand_ins(tmp_path, monkeypatch):
    assert kit.checkout_commit(tmp_path) == "unknown (not a git checkout)"
    assert kit.checkout_commit(tmp_path, "abc1234 (an archive)") == "abc1234 (an archive)"
    (tmp_path / "conf.txt").write_text("from the checkout")
    (tmp_path / "mod.py").write_text("import sys\nTEXT = open('conf.txt').read()\nSEEN = __name__ in sys.modules\n")
    monkeypatch.delitem(sys.modules, "kit_test_mod", raising=False)
    mod = kit.load_file("kit_test_mod", tmp_path / "mod.py", chdir=True)
    assert mod.TEXT == "from the checkout" and not mod.SEEN and "kit_test_mod" not in sys.modules
    mod = kit.load_file("kit_test_mod", tmp_path / "mod.py", register=True, chdir=True)
    assert mod.SEEN and sys.modules["kit_test_mod"] is mod
    with pytest.raises(FileNotFoundError):  # without chdir the relative read fails here, and the cwd is back
        kit.load_file("kit_test_other", tmp_path / "mod.py")
    assert not kit.importable("kit_no_such_module")
    monkeypatch.delitem(sys.modules, "kit_no_such_module", raising=False)
    stub = kit.stand_in("kit_no_such_module", answer=42)
    assert kit.importable("kit_no_such_module") and sys.modules["kit_no_such_module"] is stub and stub.answer == 42
    monkeypatch.delitem(sys.modules, "kit_no_such_module")
    assert kit.CountingEncoding(lambda text: len(text) // 2).encode("abcdef", disallowed_special=()) == [0, 0, 0]


def test_paired_interval_streams_and_rounding():
    ours, ref = [1, 0, 1, 1, 0.5], [1, 1, 0, 1, 0.5]
    low, high = kit.paired_interval(ours, ref, "cell")
    assert low <= 0.0 <= high and (low, high) == kit.paired_interval(ours, ref, "cell")  # seeded per key
    assert kit.paired_interval([1, 1], [1, 1], "same") == (0.0, 0.0)
    assert all(math.isnan(v) for v in kit.paired_interval([], [], "none"))
    # rounding each item to 0.01 points first: a difference below it is no difference
    assert kit.paired_interval([0.123441], [0.12344], "t", places=2) == (0.0, 0.0)
    assert kit.paired_interval([0.123441], [0.12344], "t") != (0.0, 0.0)


def test_the_tests_tokenizer_unless_one_is_given():
    assert kit.tokenizer_folder("/models/smollm2", "kit-tok-") == "/models/smollm2"
    first, second = (Path(kit.tokenizer_folder(None, "kit-tok-")) for _ in range(2))
    try:
        assert first != second and first.name.startswith("kit-tok-")
        files = sorted(p.name for p in first.iterdir())
        assert files and files == sorted(p.name for p in second.iterdir())
        assert all((first / f).read_bytes() == (second / f).read_bytes() for f in files)  # the pins' tokenizer
    finally:
        shutil.rmtree(first)
        shutil.rmtree(second)


def test_sample_records_keep_the_sample_lines_in_order(tmp_path):
    lines = [{"type": "header", "v": 1}, {"type": "sample", "i": 2}, {"type": "cell"}, {"type": "sample", "i": 0}]
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert kit.sample_records(tmp_path) == [{"type": "sample", "i": 2}, {"type": "sample", "i": 0}]


def test_server_ids_ask_the_servers_tokenize(monkeypatch):
    import http.server
    import threading

    seen = []

    class Tokenize(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            seen.append((self.path, json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
            body = json.dumps({"tokens": [5, 6, 7], "count": 3}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Tokenize)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    msgs = [{"role": "user", "content": "hi"}]
    try:
        assert kit.server_ids(base, "m", msgs) == [5, 6, 7]
        assert seen == [("/tokenize", {"model": "m", "messages": msgs, "add_generation_prompt": True})]
        assert kit.server_ids(base, "m", None) is None and kit.server_ids(base, "m", []) is None and len(seen) == 1
    finally:
        server.shutdown()
        server.server_close()
    assert kit.server_ids(base, "m", msgs) is None  # nothing listens there now


def test_our_served_eval_fails_in_one_line_naming_its_log(tmp_path):
    run = tmp_path / "ours-run"
    run.mkdir()
    (run / "stale.txt").write_text("from an earlier run")
    url = f"http://127.0.0.1:{kit.free_port()}/v1"
    with pytest.raises(kit.BenchError, match=r"harness eval exited 2; see .*ours-eval\.log"):
        kit.served_eval(url, "m", ["--suite", "no-such-suite"], tmp_path, threads=1, concurrency=1)
    assert not (run / "stale.txt").exists()  # the run folder is emptied first
    said = (tmp_path / "ours-eval.log").read_text()
    assert said.startswith("error: ") and said.count("error:") == 1  # (no server answers at url)


def test_harness_eval_reports_status_command_and_wall(tmp_path):
    rc, command, wall = kit.harness_eval(["--help"], tmp_path / "run", tmp_path / "logs" / "eval.log", threads=1)
    assert rc == 0 and command == f"harness eval --help --out {tmp_path / 'run'}" and wall > 0
    assert "--ckpts" in (tmp_path / "logs" / "eval.log").read_text()


def test_the_model_folder_is_checked_in_one_line(tmp_path):
    with pytest.raises(
        kit.BenchError, match=r"is not a transformers model folder \(no config.json\): pass --model DIR"
    ):
        kit.check_model_folder(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    kit.check_model_folder(str(tmp_path))
