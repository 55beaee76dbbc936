"""``torch_compile`` (issue 28 item 3): the regional compile (each transformer layer compiled, one
graph reused) gives eager's loss and gradients for every pre-training objective; the step has no
graph break in dense-pt's own code (a ``.item()``, a branch on a tensor, numpy in the step would
show here); padding buckets (``pad_to_multiple_of``) change no loss and bound the shapes a compiled
step meets; the trainer logs the first compiled step's wall time. Traced with the "aot_eager"
backend (the same Dynamo graphs as inductor, without its minutes of C++ code generation on CPU)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from dense_pt.training import TrainConfig  # noqa: E402
from dense_pt.training.switches import compile_model, repeated_layers, resolve_compile  # noqa: E402
from pretrain_helpers import make_batch, special_ids, tiny_encoder, tiny_generator, view_for  # noqa: E402

METHODS = ["mlm", "cdmae", "simlm", "seed", "condenser", "contrastive"]
PACKAGE = str(Path(__file__).resolve().parents[1] / "python" / "dense_pt")


def objective(method: str, generator: str | None = None):
    """A tiny fp32 objective, dropout off (eager and compiled must see the same masks)."""
    from dense_pt.objectives import MethodOptions, build_objective, resolve_options

    torch.manual_seed(0)
    extra: dict[str, Any] = {"generator": generator or "joint"} if method == "simlm" else {}
    if method == "seed":
        extra["seed_window"] = "band"  # strict runs the decoder on [B * L, k + 1] windows: slow to trace
    if method != "mlm":
        extra["decoder_layers"] = 1
    opts = resolve_options(method, MethodOptions(**extra))
    return build_objective(method, tiny_encoder(), special_ids(), opts).float().train()


def batch_for(method: str, seed: int = 2, length: int = 20) -> dict:
    data = view_for(method, make_batch(length=length, seed=seed))
    if method == "contrastive":  # the context: the passage's first tokens as its own sequence
        data["ctx_input_ids"] = data["original_ids"][:, :8].copy()
        data["ctx_input_ids"][:, 7] = 3  # [SEP]
        data["ctx_attention_mask"] = np.ones_like(data["ctx_input_ids"])
    return {k: torch.as_tensor(v) for k, v in data.items()}


def step(model, batch: dict) -> tuple[float, Any]:
    """One forward and backward: the loss and every gradient, flat (the generator's samples drawn
    from a fixed seed, so eager and compiled replace the same tokens)."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(11)
    if hasattr(model, "cache_parts"):
        parts = model.cache_parts(batch)
        outs = {k: model.represent(k, rows, batch, terms=True) for k, rows in parts.items()}
        loss = model.coupled_loss({k: o["rep"] for k, o in outs.items()}, batch)["loss"]
        loss = loss + sum(v for o in outs.values() for k, v in o.items() if k != "rep")
    else:
        loss = model(batch)["loss"]
    loss.backward()
    grads = [p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel()) for p in model.parameters()]
    return float(loss.detach()), torch.cat(grads)


@pytest.fixture
def aot_eager(monkeypatch):
    import dense_pt.training.switches as switches

    monkeypatch.setattr(switches, "COMPILE_BACKEND", "aot_eager")
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("method", METHODS)
def test_the_regional_compile_gives_eager_loss_and_gradients(method, aot_eager):
    eager = objective(method)
    compiled = objective(method)
    layers = repeated_layers(compiled)
    want = list(compiled.encoder.encoder.layer)  # 3 layers, then a decoder's 1 (mlm has none)
    want += [m for name, m in compiled.named_modules() if name.endswith("layers.0")]
    if method == "simlm":  # the joint generator's 3 layers
        want += list(compiled.generator.mlm.base_model.encoder.layer)
    assert {id(m) for m in layers} == {id(m) for m in want} and len(layers) == len(want)
    assert compile_model(compiled, "layers") == len(layers)
    batch = batch_for(method)
    want_loss, want = step(eager, batch)
    got_loss, got = step(compiled, batch)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1  # the layers were traced
    assert got_loss == pytest.approx(want_loss, rel=1e-6)
    assert float((got - want).norm() / want.norm()) < 1e-5
    # every layer of a class runs one graph per (shape, grad mode): a second batch of the same
    # shape traces nothing new
    before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    step(compiled, batch_for(method, seed=3))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == before


def graph_breaks_in_our_code(fn, *args) -> list[str]:
    """``torch._dynamo.explain`` over ``fn(*args)``: the break reasons raised in dense-pt's files.
    Dynamo may trace the gathers of labelled rows (``nonzero``, a data-dependent size) as what they
    are; everything else that needs the host (``.item()``, ``bool(tensor)``, numpy) stays a break."""
    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        explained = torch._dynamo.explain(fn)(*args)
    torch._dynamo.reset()
    found = []
    for reason in explained.break_reasons:
        frames = [f for f in reason.user_stack if f.filename.startswith(PACKAGE)]
        if frames:
            found.append(f"{reason.reason.splitlines()[0]} at {frames[-1].filename}:{frames[-1].lineno}")
    return found


@pytest.mark.parametrize("method", METHODS)
def test_the_step_has_no_graph_break_in_our_code(method):
    model = objective(method)
    batch = batch_for(method)
    assert graph_breaks_in_our_code(lambda b: step_loss(model, b), batch) == []


def step_loss(model, batch: dict) -> Any:
    if hasattr(model, "cache_parts"):
        parts = model.cache_parts(batch)
        reps = {k: model.represent(k, rows, batch, terms=True)["rep"] for k, rows in parts.items()}
        return model.coupled_loss(reps, batch)["loss"]
    return model(batch)["loss"]


def test_the_graph_break_check_sees_a_host_sync():
    """The check above can fail: the MLM loss with a ``.item()`` (as it had before) breaks there."""
    from dense_pt.models import heads

    model = objective("mlm")

    def with_item(batch):
        seq = model.encode(batch["input_ids"], batch["attention_mask"]).last_hidden_state
        if not bool((batch["labels"] != -100).any()):  # the old early return
            return seq.sum() * 0.0
        return heads.mlm_loss(model.lm_head, seq, batch["labels"])

    with_item.__code__ = with_item.__code__.replace(co_filename=heads.__file__)  # as if in our code
    assert graph_breaks_in_our_code(with_item, batch_for("mlm"))


def test_the_mlm_loss_without_labels_is_zero_with_a_gradient():
    model = objective("mlm")
    batch = batch_for("mlm")
    batch["labels"] = torch.full_like(batch["labels"], -100)
    loss = model(batch)["loss"]
    loss.backward()
    assert float(loss.detach()) == 0.0 and all(
        p.grad is None or torch.all(p.grad == 0) for p in model.parameters()
    )


def test_the_frozen_generator_layers_are_compiled_too(tmp_path, aot_eager):
    model = objective("simlm", generator=tiny_generator(tmp_path / "gen"))
    gen_layers = list(model.generator.mlm.base_model.encoder.layer)
    layers = repeated_layers(model)
    assert all(any(g is m for m in layers) for g in gen_layers)
    eager = objective("simlm", generator=str(tmp_path / "gen"))
    compile_model(model, "layers")
    batch = batch_for("simlm")
    (a, ga), (b, gb) = step(eager, batch), step(model, batch)
    assert b == pytest.approx(a, rel=1e-6) and float((gb - ga).norm() / ga.norm()) < 1e-5


def test_compile_modes():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert TrainConfig().torch_compile == "off"
    assert TrainConfig(torch_compile=True).torch_compile == "model"  # type: ignore[arg-type]  # the switch's meaning before modes
    assert TrainConfig(torch_compile=False).torch_compile == "off"  # type: ignore[arg-type]  # as a TOML file may say
    # auto: eager until the device check measures the regional compile ahead (switches.AUTO_COMPILE_DEVICES)
    assert resolve_compile("auto", cpu) == resolve_compile("auto", cuda) == "off"
    assert resolve_compile("layers", cpu) == "layers" and resolve_compile("model", cuda) == "model"
    model = objective("cdmae")
    assert compile_model(model, "off") == 0
    assert compile_model(model, "model") == 1  # the encoder whole; the decoder stays eager


# --- padding buckets -------------------------------------------------------------------------------


def store_of_lengths(path):
    """A store whose passages run from 1 to 30 words, in that order."""
    from dense_pt.data.store import build_store_from_texts
    from dense_pt.data.tokenizer import train_wordpiece
    from pretrain_helpers import WORDS

    rng = np.random.default_rng(0)
    docs = [(f"p{i}", " ".join(rng.choice(WORDS, 1 + i // 2))) for i in range(60)]
    tok = train_wordpiece([t for _, t in docs], vocab_size=120, min_frequency=1)
    return build_store_from_texts(path, docs, tok)


def test_padding_buckets_change_no_loss_and_bound_the_shapes(tmp_path):
    from dense_pt.objectives import MethodOptions, build_objective, resolve_options
    from dense_pt.objectives.options import SpecialIds
    from dense_pt.pretrain.data import make_collate_fn
    from pretrain_helpers import tiny_config

    store = store_of_lengths(tmp_path / "store")
    opts = resolve_options("mlm", MethodOptions(whole_word=False))
    plain = make_collate_fn(store, "mlm", opts, 48, seed=0)
    bucketed = make_collate_fn(store, "mlm", opts, 48, seed=0, pad_to_multiple_of=16)
    from transformers import AutoModel

    torch.manual_seed(0)
    encoder = AutoModel.from_config(tiny_config(vocab_size=store.vocab_size)).double()
    model = build_objective("mlm", encoder, SpecialIds.from_store(store), opts).double().eval()
    widths, bucket_widths = set(), set()
    for start in range(0, 60, 5):
        rows = np.arange(start, start + 5)
        a, b = plain(rows, 0), bucketed(rows, 0)
        widths.add(a["input_ids"].shape[1])
        bucket_widths.add(b["input_ids"].shape[1])
        assert b["input_ids"].shape[1] % 16 == 0 and b["input_ids"].shape[1] >= a["input_ids"].shape[1]
        n = a["input_ids"].shape[1]
        for key in a:  # the same batch, then padding
            assert np.array_equal(b[key][:, :n], a[key]), key
        with torch.no_grad():
            la = model({k: torch.as_tensor(v) for k, v in a.items()})["loss"]
            lb = model({k: torch.as_tensor(v) for k, v in b.items()})["loss"]
        assert abs(float(la) - float(lb)) <= 1e-12 * abs(float(la))
    assert len(bucket_widths) <= 3 < len(widths)  # 48 / 16 shapes at most, against one per batch


def test_pad_to_multiple_of_reaches_the_collator_and_is_checked(tmp_path):
    from dense_pt.errors import InvalidArgumentError
    from dense_pt.pretrain import build_config
    from dense_pt.pretrain.run import _batch_source, _build_objective
    from pretrain_helpers import tiny_config_file, tiny_store

    store = tiny_store(tmp_path / "store")
    model = tiny_config_file(tmp_path / "enc.json", store)
    top = {"method": "mlm", "model": model, "corpus": str(store.path), "out": str(tmp_path / "o"),
           "max_length": 40, "pad_to_multiple_of": 16}  # fmt: skip
    cfg = build_config(top=top, train={"batch_size": 4, "warmup": 0})
    source, _, _ = _batch_source(cfg, store, None, 1)
    batch = next(iter(source.iter_epoch(0, 0, 0, 1)))
    assert batch["input_ids"].shape[1] % 16 == 0
    top = {**top, "max_length": 150, "pad_to_multiple_of": 32}  # up to 160: the model has 160 positions
    _build_objective(build_config(top=top, train={"batch_size": 4, "warmup": 0}), store)
    top = {**top, "max_length": 150, "pad_to_multiple_of": 48}  # 192 > 160 positions
    with pytest.raises(InvalidArgumentError, match="pad_to_multiple_of 48 pads max_length 150 up to 192"):
        _build_objective(build_config(top=top, train={"batch_size": 4, "warmup": 0}), store)


# --- the trainer logs the compile time -------------------------------------------------------------


def test_the_trainer_logs_the_first_compiled_step(tmp_path, aot_eager):
    from dense_pt.training import IndexedBatchSource, Trainer

    data = {k: v.numpy() for k, v in batch_for("cdmae").items()}

    def make(rows, epoch):
        return {k: v[rows] for k, v in data.items()}

    def records(mode):
        cfg = TrainConfig(
            max_steps=2, batch_size=3, warmup=0, precision="fp32", log_every=1, torch_compile=mode
        )
        Trainer(
            objective("cdmae"), cfg, tmp_path / mode, IndexedBatchSource(6, 3, make), progress=False
        ).train()
        return [json.loads(line) for line in open(tmp_path / mode / "log.jsonl")]

    off, layers = records("off"), records("layers")
    assert "compile_s" not in off[0] and layers[0]["compile_s"] > 0 and "compile_s" not in layers[1]
    np.testing.assert_allclose([r["loss"] for r in layers], [r["loss"] for r in off], rtol=1e-6)
