"""Bad inputs to the retrieval commands (encode, search, bm25, negatives mine), the exit codes,
the help text and the status/progress lines, as a user meets them through the real command line
(``dense_pt.cli.main``, what a terminal shows; stderr is not a terminal here, so progress is plain
lines). None may end in a traceback. The data half (corpus, pmi) is tests/test_bad_inputs_data.py.

Exit codes: 2 a usage error (an unknown option, a value out of range), 1 an error in the data or
the system, 130 interrupted.

Each case is a row of CASES: the arguments (``{tmp}``: a fresh folder; ``{model}``, ``{store}``,
``{beir}``: the tiny retrieval fixtures; ``{qemb}``/``{pemb}``: their query and passage embeddings;
``{run}``: a BM25 run), files to write first, the environment, and regexes that must (``message``)
and must not (``absent``) appear in stdout + stderr.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("faiss")
pytest.importorskip("bm25s")

from cli_helpers import cli_child, run_cli, subgroup
from dense_pt.config.retrieval import BM25Command, EncodeSettings
from retrieval_fixtures import tiny_setup


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from dense_pt.retrieval.bm25 import bm25
    from dense_pt.retrieval.encode import encode
    from dense_pt.runs import write_run

    root = tmp_path_factory.mktemp("cli")
    beir, model, store, _, _ = tiny_setup(root)
    encode(model, store, root / "pemb", EncodeSettings(max_length=64), progress=False)
    encode(model, beir / "queries.jsonl", root / "qemb", progress=False)
    bm25(beir / "corpus.jsonl", beir / "queries.jsonl", root / "run.trec", BM25Command(k=20))
    write_run(root / "unused.trec", {"q": {"d": 1.0}})
    return root


@dataclass
class Case:
    name: str
    argv: list[str]
    code: int
    message: str  # regex searched in stdout + stderr (whitespace collapsed)
    absent: str | None = None  # regex that must not match
    files: dict[str, str | bytes] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    after: Callable[[Path], None] | None = None  # checks on the folder afterwards


def _all_finite_checkpoints(tmp: Path) -> None:
    """Every checkpoint left holds finite weights only, and there is one (the steps before)."""
    import torch
    from safetensors.torch import load_file

    found = sorted((tmp / "r" / "checkpoints").glob("checkpoint-*/model.safetensors"))
    assert found, "no checkpoint of the steps before it"
    for path in found:
        assert all(torch.isfinite(t).all() for t in load_file(str(path)).values()), path
    assert not (tmp / "r" / "model").exists()


def _jsonl(*objs: object) -> str:
    return "".join(json.dumps(o) + "\n" for o in objs)


PIPELINE = (
    'out = "o"\n[data]\ncorpus = "c.jsonl"\nqueries = "q.jsonl"\nqrels = "q.tsv"\n[model]\ninit = "m"\n'
)
TRAIN = ["train", "retriever", "{model}", "--corpus", "{store}", "--queries", "{beir}/queries.jsonl",
         "--qrels", "{beir}/qrels/train.tsv", "-o", "{tmp}/r", "--batch-size", "4", "--group-size", "2",
         "--precision", "fp32"]  # fmt: skip
BM25 = ["bm25", "{beir}/corpus.jsonl", "--queries", "{beir}/queries.jsonl", "-o", "{tmp}/run.trec"]
SEARCH = ["search", "{qemb}", "{pemb}", "-o", "{tmp}/run.trec"]
CASES = [
    # ---- encode -------------------------------------------------------------------------------
    Case(
        "encode: a folder that is not a model",
        ["encode", "{tmp}/notamodel", "{store}", "-o", "{tmp}/e"],
        1,
        r"error: .*notamodel: not a model folder \(no config\.json",
        files={"notamodel/readme.txt": "hello"},
    ),
    Case(
        "encode: a model folder that does not exist",
        ["encode", "{tmp}/nothere", "{store}", "-o", "{tmp}/e"],
        1,
        r"error: .*nothere: no such model folder",
    ),
    Case(
        "encode: --max-length above the model's positions",
        ["encode", "{model}", "{store}", "-o", "{tmp}/e", "--max-length", "512"],
        2,
        r"--max-length\) 512 is longer than the model's 128 positions .*use at most 128",
    ),
    Case(
        "encode: a default length above the model's positions is clamped with a notice",
        ["encode", "{model}", "{store}", "-o", "{tmp}/e"],
        0,
        r"the default length 144 is longer than .*128 positions; encoding with max length 128.*"
        r"encode: encoding: started.*encode: encoding: done, 48 passages in .*wrote .*/e",
    ),
    Case(
        "encode: a corpus.jsonl given as queries",
        ["encode", "{model}", "{beir}/corpus.jsonl", "-o", "{tmp}/e"],
        1,
        r"corpus\.jsonl:1: this looks like a corpus, not queries \(its records have a 'title'\)",
    ),
    Case(
        "encode: a missing queries file",
        ["encode", "{model}", "{tmp}/q.jsonl", "-o", "{tmp}/e"],
        1,
        r"error: \S*/q\.jsonl: no such corpus store or queries file$",
    ),
    Case(
        "encode: --batch-size 0",
        ["encode", "{model}", "{store}", "-o", "{tmp}/e", "--batch-size", "0"],
        2,
        r"dense-pt encode: batch_size: must be >= 1, got 0",
    ),
    # ---- search -------------------------------------------------------------------------------
    Case(
        "search: queries and passages swapped",
        ["search", "{pemb}", "{qemb}", "-o", "{tmp}/run.trec"],
        1,
        r"pemb: holds passages embeddings, but the first argument \(query embeddings\) needs queries "
        r"\(are the queries and passages swapped\?\)",
    ),
    Case(
        "search: given a corpus store",
        ["search", "{qemb}", "{store}", "-o", "{tmp}/run.trec"],
        1,
        r"store: this is a corpus store, not embeddings",
    ),
    Case(
        "search: a folder that does not exist",
        ["search", "{qemb}", "{tmp}/nothere", "-o", "{tmp}/run.trec"],
        1,
        r"nothere: no such embeddings folder",
    ),
    Case(
        "search: --max-memory-gb 0",
        [*SEARCH, "--max-memory-gb", "0"],
        2,
        r"dense-pt search: max_memory_gb: must be > 0, got 0",
    ),
    Case(
        "search: --max-memory-gb -1",
        [*SEARCH, "--max-memory-gb", "-1"],
        2,
        r"max_memory_gb: must be > 0, got -1",
    ),
    Case("search: -k 0", [*SEARCH, "-k", "0"], 2, r"dense-pt search: k: must be >= 1, got 0"),
    Case(
        "search: status and progress on stderr",
        [*SEARCH, "--max-memory-gb", "0.000001"],
        0,
        r"search: searching: started.*search: searching: done.*wrote .*run\.trec",
    ),
    # ---- bm25 ---------------------------------------------------------------------------------
    Case("bm25: -k 0", [*BM25, "-k", "0"], 2, r"dense-pt bm25: k: must be >= 1, got 0"),
    Case("bm25: --b 7", [*BM25, "--b", "7"], 2, r"dense-pt bm25: b: must be <= 1, got 7\.0"),
    Case("bm25: --k1 -2", [*BM25, "--k1", "-2"], 2, r"dense-pt bm25: k1: must be >= 0, got -2\.0"),
    Case(
        "bm25: a missing queries file, its path printed once",
        ["bm25", "{beir}/corpus.jsonl", "--queries", "{tmp}/nope.jsonl", "-o", "{tmp}/run.trec"],
        1,
        r"^error: [^ ]*/nope\.jsonl: no such file$",
    ),
    Case(
        "bm25: phases named with their time",
        [*BM25, "--index", "{tmp}/index"],  # a new index: built, then searched
        0,
        r"bm25: indexing: started.*bm25: indexing: done, 48 passages in .* s.*"
        r"bm25: retrieving: done, 16 queries in .*wrote .*run\.trec",
    ),
    Case(
        "--quiet silences status and progress",
        ["--quiet", *BM25],
        0,
        r"^$",
        absent=r"bm25:|wrote",
    ),
    Case("-q after the command name silences them too", [*BM25, "-q"], 0, r"^$"),
    Case(
        "--quiet among the command's options",
        [
            "bm25",
            "{beir}/corpus.jsonl",
            "--quiet",
            "--queries",
            "{beir}/queries.jsonl",
            "-o",
            "{tmp}/run.trec",
        ],
        0,
        r"^$",
    ),
    Case(
        "a command's own --quiet stays its own",
        ["pipeline", "run", "{tmp}/p.toml", "--quiet", "--dry-run", "--set", "r1.train.lr=inf"],
        2,
        r"r1\.train\.lr: must be a finite number",
        files={"p.toml": PIPELINE},
    ),
    Case(
        "$DENSE_PT_LOG=warning silences them too",
        BM25,
        0,
        r"^$",
        env={"DENSE_PT_LOG": "warning"},
    ),
    Case(
        "$DENSE_PT_LOG nonsense",
        BM25,
        2,
        r"\$DENSE_PT_LOG must be one of debug, info, warning, error, got 'loud'",
        env={"DENSE_PT_LOG": "loud"},
    ),
    Case(
        "--verbose with --quiet",
        ["--verbose", "--quiet", *BM25],
        2,
        r"--verbose and --quiet exclude each other",
    ),
    # ---- negatives mine -----------------------------------------------------------------------
    Case(
        "negatives mine: a readable summary",
        ["negatives", "mine", "{run}", "--qrels", "{beir}/qrels/train.tsv", "-o", "{tmp}/n.dpneg"],
        0,
        r"wrote .*n\.dpneg: \d+ negatives for 16 queries \([\d.]+ per query\); \d+ judged positives excluded",
        absent=r"\{'|excluded_positives",
    ),
    # ---- help text and option names -------------------------------------------------------------
    Case("help: bm25 --k1 and --b", ["bm25", "--help"], 0, r"--k1 .*saturation.*--b .*Length normalisation"),
    Case(
        "help: negatives mine --seed",
        ["negatives", "mine", "--help"],
        0,
        r"--seed .*Seed of --sampling random",
    ),
    Case("help: encode --batch-size", ["encode", "--help"], 0, r"--batch-size .*Sequences per forward pass"),
    Case(
        "help: flags show no value type",
        ["corpus", "build", "--help"],
        0,
        r"--force .*--allow-empty",
        absent=r"--(?!help\b)[\w-]+( +--no-[\w-]+)? +(<bool>|BOOLEAN)",  # typer's own --help may show one
    ),
    Case("help: the root lists --quiet and exit codes", ["--help"], 0, r"--quiet.*130 interrupted"),
    Case("-o everywhere: pmi build", ["pmi", "build", "--help"], 0, r"--out +-o"),
    Case("-o everywhere: negatives export", ["negatives", "export", "--help"], 0, r"--out +-o"),
    # ---- settings that are not numbers, counts beyond any plan --------------------------------
    *[
        Case(
            f"pipeline: --set {setting}",
            ["pipeline", "run", "{tmp}/p.toml", "--dry-run", "--set", setting],
            2,
            rf"^error: \S*p\.toml: {message}$",
            files={"p.toml": PIPELINE},
        )
        for setting, message in [
            ("r1.train.lr=inf", r"r1\.train\.lr: must be a finite number, got inf"),
            ("r1.train.lr=nan", r"r1\.train\.lr: must be a finite number, got nan"),
            ("r2.tau=-inf", r"r2\.tau: must be a finite number, got -inf"),
            ("mine.relative_margin=inf", r"mine\.relative_margin: must be a finite number, got inf"),
            (
                "r1.train.max_steps=100000000000000000000000",
                r"r1\.train\.max_steps: must be at most 2,147,483,647 in magnitude, got 100000000000000000000000",
            ),
            ("r1.train.max_steps=1e23", r"r1\.train\.max_steps: expected an integer, got 1e\+23"),
            ("eval.k=3000000000", r"eval\.k: must be at most 2,147,483,647 in magnitude, got 3000000000"),
        ]
    ],
    Case(
        "train retriever: --lr inf",
        [*TRAIN, "--lr", "inf"],
        2,
        r"dense-pt train retriever: train\.lr: must be a finite number, got inf",
    ),
    Case(
        "train retriever: --max-steps 10**23",
        [*TRAIN, "--max-steps", "100000000000000000000000"],
        2,
        r"train\.max_steps: must be at most 2,147,483,647 in magnitude",
    ),
    Case("bm25: --k1 inf", [*BM25, "--k1", "inf"], 2, r"dense-pt bm25: k1: must be a finite number, got inf"),
    Case(
        "search: --max-memory-gb inf",
        [*SEARCH, "--max-memory-gb", "inf"],
        2,
        r"max_memory_gb: must be a finite number",
    ),
    Case(
        "train retriever: a learning rate that makes the loss nan stops the run, nothing non-finite saved",
        ["--quiet", *TRAIN, "--lr", "1e9", "--max-steps", "4", "--save-every", "1", "--log-every", "10"],
        1,
        r"^error: retriever: training stopped at step 2: the loss is nan; nothing non-finite was saved "
        r"\(checkpoints in \S+/checkpoints predate it\); its learning rate \(lr = 1e\+09\) is the likely "
        r"setting to lower$",
        after=_all_finite_checkpoints,
    ),
    # ---- configuration files that are not TOML text --------------------------------------------
    Case(
        "pipeline: a binary config",
        ["pipeline", "run", "{tmp}/p.toml"],
        1,
        r"^error: \S*p\.toml: not a UTF-8 TOML file \(byte 0xf3 at offset 0\): it is not text \(a binary file\?\)$",
        files={"p.toml": bytes(range(243, 256)) * 20},
    ),
    Case(
        "pipeline: a UTF-16 config",
        ["pipeline", "run", "{tmp}/p.toml"],
        1,
        r"^error: \S*p\.toml: not a UTF-8 TOML file \(byte 0xff at offset 0\): it is UTF-16: save it as UTF-8$",
        files={"p.toml": PIPELINE.encode("utf-16")},
    ),
    Case(
        "bm25 --config: a binary file",
        [*BM25, "--config", "{tmp}/c.toml"],
        1,
        r"^error: \S*c\.toml: not a UTF-8 TOML file",
        files={"c.toml": b"\x00\xff\xfe\x80" * 50},
    ),
    Case(
        "pipeline: TOML nested 100,000 levels deep",
        ["pipeline", "run", "{tmp}/p.toml"],
        1,
        r"^error: \S*p\.toml: invalid TOML: nested too deeply$",
        files={"p.toml": "a = " + "[" * 100_000 + "]" * 100_000 + "\n"},
    ),
    Case(
        "pipeline: inline tables nested 5,000 deep",
        ["pipeline", "run", "{tmp}/p.toml"],
        1,
        r"^error: \S*p\.toml: invalid TOML: nested too deeply$",
        files={"p.toml": "a = " + "{b=" * 5000 + "1" + "}" * 5000 + "\n"},
    ),
    Case(
        "pipeline: /dev/zero as the config ends, in one line",
        ["pipeline", "run", "/dev/zero"],
        1,
        r"^error: /dev/zero: larger than 16 MiB: not a configuration file$",
    ),
    Case(
        "pipeline: --stop-after banana is a usage error, naming the stages",
        ["pipeline", "run", "{tmp}/p.toml", "--stop-after", "banana"],
        2,
        r"Invalid value for '--stop-after'.*'banana' is not one of.*'store', 'split',",
        files={"p.toml": PIPELINE},
    ),
    Case(
        "pipeline: --until and --stop-after together",
        ["pipeline", "run", "{tmp}/p.toml", "--until", "r1", "--stop-after", "r1"],
        2,
        r"give --until or --stop-after \(the same option\), not both",
    ),
    # ---- a file name that is not UTF-8 -----------------------------------------------------------
    Case(
        "corpus build -o a latin-1 folder name",
        ["--quiet", "corpus", "build", "{beir}/corpus.jsonl", "-t", "{model}", "-o", "{tmp}/st\udce9"],
        1,
        r"^error: \S*/st\\xe9: the file name is not UTF-8 text: dense-pt records paths in its manifests",
    ),
]


def _places(world: Path, tmp: Path) -> dict[str, str]:
    return {
        "tmp": str(tmp),
        "model": str(world / "model"),
        "store": str(world / "store"),
        "beir": str(world / "beir"),
        "qemb": str(world / "qemb"),
        "pemb": str(world / "pemb"),
        "run": str(world / "run.trec"),
    }


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(case: Case, world: Path, tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("DENSE_PT_LOG", raising=False)
    for name, content in case.files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            (tmp_path / name).write_bytes(content)
        else:
            (tmp_path / name).write_text(content, encoding="utf-8")
    argv = [a.format(**_places(world, tmp_path)) for a in case.argv]
    code, out, err = run_cli(argv, capsys, monkeypatch, case.env)
    both = out + err
    assert code == case.code, both
    assert "Traceback" not in both
    if case.message == r"^$":  # nothing at all
        assert not both.strip(), both
    else:
        flat = " ".join(both.split())
        last = " ".join(err.strip().splitlines()[-1].split()) if err.strip() else ""
        target = last if case.message.startswith("^") else flat  # anchored: the error line itself
        assert re.search(case.message, target, re.DOTALL), both
    if case.absent:
        assert not re.search(case.absent, both), both
    if case.code == 1:  # a data or system error: exactly one line on stderr, nothing on stdout
        assert not out and len(err.strip().splitlines()) == 1, (out, err)
    if case.after is not None:
        case.after(tmp_path)


def test_every_example_file_a_help_text_names_exists():
    """`study run --help` named examples/study-demo.toml, which does not exist."""
    import typer

    from dense_pt.cli import app

    root = typer.main.get_command(app)
    texts = []
    for cmd in subgroup(root).commands.values():
        for leaf in getattr(cmd, "commands", {"": cmd}).values():
            texts += [leaf.help or ""] + [getattr(p, "help", None) or "" for p in leaf.params]
    named = set(re.findall(r"examples/[\w.-]+\.toml", " ".join(texts)))
    assert named, "no help text names an example file"
    repo = Path(__file__).resolve().parents[1]
    assert {n for n in named if not (repo / n).is_file()} == set()


def test_there_are_many_cases():
    assert len(CASES) >= 30


def test_results_go_to_stdout_and_status_to_stderr(world, tmp_path, capsys, monkeypatch):
    """`evaluate` prints its measures (a result) on stdout; `bm25`'s 'wrote' line is status."""
    code, out, err = run_cli(
        ["evaluate", str(world / "run.trec"), "--qrels", str(world / "beir" / "qrels" / "train.tsv"), "-m", "nDCG@10"],
        capsys, monkeypatch, {},
    )  # fmt: skip
    assert code == 0 and re.search(r"nDCG@10 +0\.\d{4}", out), (out, err)
    code, out, err = run_cli([a.format(**_places(world, tmp_path)) for a in BM25], capsys, monkeypatch, {})
    assert code == 0 and not out and "wrote" in err


# ---- exceptions nobody planned for -----------------------------------------------------------
def _boom(*args, **kwargs):
    raise ZeroDivisionError("boom in the middle")


@pytest.mark.parametrize("debug", [False, True])
def test_an_unexpected_exception_is_one_line_unless_debugging(world, tmp_path, capsys, monkeypatch, debug):
    import dense_pt.retrieval.bm25 as mod

    monkeypatch.setattr(mod, "bm25", _boom)
    if debug:
        monkeypatch.setenv("DENSE_PT_DEBUG", "1")
    else:
        monkeypatch.delenv("DENSE_PT_DEBUG", raising=False)
    code, _, err = run_cli([a.format(**_places(world, tmp_path)) for a in BM25], capsys, monkeypatch, {})
    assert code == 1
    assert err.strip().splitlines()[-1] == (
        "internal error: ZeroDivisionError: boom in the middle (set DENSE_PT_DEBUG=1 for the traceback)"
    )
    assert ("Traceback" in err) is debug


PANIC_TYPE = type("PanicException", (BaseException,), {"__module__": "pyo3_runtime"})


@pytest.mark.parametrize(
    "exc, line",
    [
        # pyo3's PanicException (a Rust library such as tokenizers panicking) is a BaseException:
        # `except Exception` let it through as a traceback (the real one: the next test)
        (
            PANIC_TYPE("called `Option::unwrap()` on a `None` value\nstack backtrace: ..."),
            "internal error: a library panicked (pyo3_runtime): called `Option::unwrap()` on a `None` value "
            "(set DENSE_PT_DEBUG=1 for the traceback)",
        ),
        (
            MemoryError("Unable to allocate 586. KiB for an array with shape (150000,)"),
            "error: out of memory (Unable to allocate 586. KiB for an array with shape (150000,)): the process "
            "reached the memory it may use (the machine's, `ulimit -v`, or the job's limit); raise the limit, "
            "or lower the batch size or --threads",
        ),
        (
            RuntimeError("Failed to launch worker thread: Resource temporarily unavailable"),
            "error: could not start worker threads (Failed to launch worker thread: Resource temporarily "
            "unavailable): a memory or process limit (`ulimit -v` / `ulimit -u`) leaves no room for them; raise "
            "it, or use fewer threads ($RAYON_NUM_THREADS, --threads)",
        ),
    ],
    ids=["panic", "memory", "threads"],
)
def test_a_panic_or_the_machines_limits_are_one_line(world, tmp_path, capsys, monkeypatch, exc, line):
    import dense_pt.retrieval.bm25 as mod

    def boom(*args, **kwargs):
        raise exc

    monkeypatch.setattr(mod, "bm25", boom)
    monkeypatch.delenv("DENSE_PT_DEBUG", raising=False)
    code, _, err = run_cli([a.format(**_places(world, tmp_path)) for a in BM25], capsys, monkeypatch, {})
    assert code == 1 and err.strip().splitlines() == [line], err


PANIC = """
import os, resource, sys
os.environ["RAYON_NUM_THREADS"] = "256"
from dense_pt.cli import main
import dense_pt.cli.corpus, dense_pt.data.build, tokenizers, pyarrow, numpy
vm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmSize:")) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + (400 << 20),) * 2)  # 256 x 2 MiB stacks do not fit
sys.argv = ["dense-pt", "corpus", "build", *sys.argv[1:], "--threads", "256"]
main()
"""


def test_a_thread_pool_that_cannot_start_under_a_memory_limit_is_not_a_panic(world, tmp_path):
    """256 tokenizer threads under an address-space limit 400 MB above what the interpreter holds
    (at 200 MB, the C library's loader itself could abort later, outside any code of ours):
    the tokenizers library's rayon pool cannot start and panicked inside the library (a 59-line
    Rust report and traceback). Now the pool is started quietly first; when it cannot start, the
    build goes on with one thread and says so, and if the memory then runs out that is one line
    too; never a panic, a Rust report or a traceback."""
    r = subprocess.run(
        [sys.executable, "-c", PANIC, str(world / "beir" / "corpus.jsonl"), "-t", str(world / "model"),
         "-o", str(tmp_path / "store")],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1", "DENSE_PT_CACHE_DIR": "", "RUST_BACKTRACE": "1"},
    )  # fmt: skip
    for noise in ("panicked", "Traceback", "stack backtrace", "PanicException"):
        assert noise not in r.stderr, r.stderr[-3000:]
    lines = r.stderr.strip().splitlines()
    if r.returncode == 127:
        # glibc itself aborts a thread start whose thread-local block cannot be allocated ("cannot
        # allocate memory for thread-local data: ABORT", exit 127) instead of failing pthread_create:
        # at an address-space limit that happens now and then, before any code of ours can answer.
        # What this test pins holds then too: no panic, no Rust report, no traceback (above).
        assert (
            not r.stderr.strip()
            or "thread-local data" in r.stderr
            or lines == ["corpus build: tokenizing: started"]
        ), r.stderr
        return
    assert "the tokenizer's worker threads could not start" in r.stderr, r.stderr
    if r.returncode == 0:
        assert lines[-1].startswith("wrote "), r.stderr
        return
    # Where the memory then runs out (the store's memory map, an Arrow or numpy buffer, a thread)
    # varies from run to run; each place is pinned in tests/test_machine_limits.py, and every one
    # ends in exactly one of these two lines: never "not a readable Arrow IPC file" for an intact
    # store (which this test once saw), never any other error.
    assert r.returncode == 1, r.stderr
    assert [line for line in lines if line.startswith("error")] == lines[-1:], r.stderr
    assert re.fullmatch(
        r"error: out of memory \(.*\): the process reached the memory it may use \(the machine's, `ulimit -v`, "
        r"or the job's limit\); raise the limit, or lower the batch size or --threads|"
        r"error: could not start worker threads \(.*\): a memory or process limit \(`ulimit -v` / `ulimit -u`\) "
        r"leaves no room for them; raise it, or use fewer threads \(\$RAYON_NUM_THREADS, --threads\)",
        lines[-1],
    ), r.stderr


def test_the_command_path_decides_the_ctrl_c_hint():
    from dense_pt.cli import RESUMABLE, command_path

    assert command_path(["--quiet", "pipeline", "run", "x.toml", "--stop-after", "r1"]) == ("pipeline", "run")
    assert command_path(["encode", "m", "s", "-o", "x"]) == ("encode",)
    assert command_path(["bm25", "c"]) == ("bm25",)
    assert ("encode",) in RESUMABLE and ("bm25",) not in RESUMABLE


# ---- a full disk, Ctrl-C: real processes ---------------------------------------------------------
FULL_DISK = """
import sys
from dense_pt.cli import main
for argv in [a.split("\\x1f") for a in sys.argv[1:]]:
    sys.argv = ["dense-pt", *argv]
    try:
        main()
        print("EXIT 0", file=sys.stderr)
    except SystemExit as e:
        print(f"EXIT {e.code}", file=sys.stderr, flush=True)
"""


def test_a_full_disk_is_one_line_naming_the_users_path_in_bm25_search_encode(world, tmp_path):
    """One process (one torch import) runs the three commands under a 1 KB file size limit."""
    p = _places(world, tmp_path)
    commands = {
        "bm25": [a.format(**p) for a in BM25],
        "search": [a.format(**p) for a in SEARCH],
        "encode": ["encode", p["model"], p["store"], "-o", f"{tmp_path}/emb", "--max-length", "64",
                   "--dtype", "float32"],
    }  # fmt: skip
    targets = {"bm25": tmp_path / "run.trec", "search": tmp_path / "run.trec", "encode": tmp_path / "emb"}

    def setup() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    r = subprocess.run(
        [sys.executable, "-c", FULL_DISK, *("\x1f".join(a) for a in commands.values())],
        preexec_fn=setup, capture_output=True, text=True, timeout=240,
        env={**os.environ, "OMP_NUM_THREADS": "1", "DENSE_PT_CACHE_DIR": "", "DENSE_PT_LOG": "warning"},
    )  # fmt: skip
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    blocks = re.split(r"EXIT (\d+)\n", r.stderr)
    assert len(blocks) == 2 * len(commands) + 1, r.stderr
    for i, name in enumerate(commands):
        text, code = blocks[2 * i], blocks[2 * i + 1]
        lines = [x for x in text.strip().splitlines() if not x.startswith("encode: the default")]
        assert code == "1" and len(lines) == 1, (name, text)
        line = lines[0]
        assert re.fullmatch(rf"error: cannot write {re.escape(str(targets[name]))}\S*: .*", line), (
            name,
            line,
        )
        assert re.search(r"File too large|disk is full", line), (name, line)
        assert ".tmp" not in line and ".partial" not in line, (name, line)
    # encode's folder keeps its mark and its first ids file (it resumes); no temporary is left
    assert not [x.name for x in tmp_path.rglob(".*") if x.name != ".dense-pt.json"], "temporaries left behind"


@pytest.mark.parametrize(
    "sig, code, message",
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated (SIGTERM)")],
    ids=["ctrl-c", "sigterm"],
)
def test_ctrl_c_and_sigterm_exit_with_one_line(world, tmp_path, sig, code, message):
    """SIGINT (Ctrl-C), or SIGTERM (kill, a scheduler's time limit: it used to exit 143 silently and
    leave its temporaries), once `bm25` has started reading the corpus: one line, exit 130 / 143, no
    traceback, nothing left (bm25 does not resume, so no hint; which commands get one:
    test_the_command_path_decides_the_ctrl_c_hint)."""
    words = "the trial vaccine immune response patients chronic elderly placebo disease".split()
    with open(tmp_path / "corpus.jsonl", "w", encoding="utf-8") as f:
        for i in range(30_000):
            text = " ".join(words[(i + j) % len(words)] for j in range(40))
            f.write(json.dumps({"_id": f"d{i}", "title": "", "text": text}) + "\n")
    # queries that match every passage, many of them: minutes of work, so the signal always lands in
    # the middle (30,000 passages alone index and search in under a second now)
    with open(tmp_path / "queries.tsv", "w", encoding="utf-8") as f:
        for i in range(200_000):
            f.write(
                f"q{i}\t{words[i % len(words)]} {words[(i + 3) % len(words)]} {words[(i + 7) % len(words)]}\n"
            )
    proc = cli_child(
        ["bm25", str(tmp_path / "corpus.jsonl"), "--queries", str(tmp_path / "queries.tsv"), "-k", "1000",
         "-o", str(tmp_path / "run.trec")]
    )  # fmt: skip
    assert proc.stderr is not None
    seen = []
    deadline = time.monotonic() + 120
    for line in proc.stderr:  # wait for the start line, then interrupt
        seen.append(line)
        if "bm25: indexing: started" in line:
            break
        assert time.monotonic() < deadline, seen
    proc.send_signal(sig)
    rest = proc.stderr.read()
    assert proc.wait(timeout=120) == code, "".join(seen) + rest
    err = "".join(seen) + rest
    assert "Traceback" not in err, err
    assert rest.strip().splitlines()[-1:] == [message], err
    assert message not in "".join(seen) and rest.count(message) == 1, err
    assert not (tmp_path / "run.trec").exists() and not list(tmp_path.glob(".*"))


# ---- ids: one word each, the same after the round trip through our own files ------------------------
def test_unusual_ids_make_the_round_trip_and_a_spaced_one_is_refused_where_it_enters(
    tmp_path, capsys, monkeypatch
):
    """Ids with '#', '/', quotes, commas, accents and full-width letters go through bm25 into a run
    that our reader, `corpus check` and `evaluate` take back unchanged; an id with a space stops
    bm25 at the corpus line that holds it (it used to be written into a run nothing could read)."""
    from dense_pt.runs import load_run

    pids = ["MED-10", "d#1", "ü/ß", '"x"', "a,b", "Ｉｄ", "x" * 300]
    words = ["river", "flood", "owl", "night", "tide", "storm", "moon"]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"_id": p, "text": f"{w} {w} water"}) + "\n" for p, w in zip(pids, words, strict=True)
        )
    )
    (tmp_path / "q.jsonl").write_text(
        _jsonl({"_id": "q#1", "text": "river water"}, {"_id": "q/ü", "text": "owl water"})
    )
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq#1\tMED-10\t1\nq/ü\tü/ß\t2\n")
    run = tmp_path / "run.trec"
    code, _, err = run_cli(["bm25", str(corpus), "--queries", str(tmp_path / "q.jsonl"), "-o", str(run)],
                           capsys, monkeypatch, {})  # fmt: skip
    assert code == 0, err
    got = load_run(run)
    assert set(got) == {"q#1", "q/ü"} and {p for hits in got.values() for p in hits} == set(pids)
    code, out, err = run_cli(["corpus", "check", str(run), "--kind", "run"], capsys, monkeypatch, {})
    assert code == 0 and "ok, 14 run lines" in out, err
    code, out, err = run_cli(["evaluate", str(run), "--qrels", str(tmp_path / "qrels.tsv"), "-m", "nDCG@10"],
                             capsys, monkeypatch, {})  # fmt: skip
    assert code == 0 and "nDCG@10" in out, err
    with open(corpus, "a", encoding="utf-8") as f:
        f.write(json.dumps({"_id": "d 8", "text": "tide"}) + "\n")
    code, out, err = run_cli(["bm25", str(corpus), "--queries", str(tmp_path / "q.jsonl"), "-o", str(tmp_path / "r2")],
                             capsys, monkeypatch, {})  # fmt: skip
    assert code == 1 and err.strip().splitlines()[-1] == (
        f"error: {corpus}:8: field \"_id\": 'd 8' contains whitespace: an id must be one word (TREC runs "
        "and qrels separate columns by whitespace); rename it"
    ), err
    assert not (tmp_path / "r2").exists()
