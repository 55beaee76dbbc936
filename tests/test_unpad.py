"""Unpadded (packed) encoders equal the padded ones: for every pre-training objective, the
retriever's queries and passages, the re-ranker's pairs and encoding, the hidden states at real
tokens, the loss and every gradient agree in float32 to 1e-5, on rows of very different lengths
and a row of one token.

Dropout is off in every equality test: the packed path draws its dropout masks over a
[tokens, hidden] tensor, the padded one over [B, L, hidden], so the same seed gives other masks (the
same distribution, other values); with dropout off both compute the same function."""

from __future__ import annotations

import numpy as np
import pytest
import torch

torch.set_num_threads(1)

from dense_pt.config.retrieval import EncodeSettings  # noqa: E402
from dense_pt.errors import InvalidArgumentError  # noqa: E402
from dense_pt.models.unpad import Packing, Unpadded, encode_tokens, resolve_unpad  # noqa: E402
from dense_pt.objectives import METHODS, MethodOptions, build_objective, resolve_options  # noqa: E402
from pretrain_helpers import CLS, PAD, SEP, VOCAB, make_batch, special_ids, tiny_config, view_for  # noqa: E402

TOL = 1e-5
DTYPES = (torch.float32, torch.float64)
LENGTHS = (1, 24, 2, 9, 24, 5)  # real tokens per row (of 24): a row of [CLS] alone, full rows, short ones


def rel(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got - want).norm() / want.norm().clamp(min=1e-30))


def shorten(batch: dict, lengths=LENGTHS) -> dict:
    """``batch`` (``make_batch``'s keys, 24 columns) with row r cut to ``lengths[r]`` real tokens."""
    b = {k: np.array(v) for k, v in batch.items()}
    for r, n in enumerate(lengths):
        for key, fill in (("original_ids", PAD), ("input_ids", PAD), ("dec_input_ids", PAD), ("attention_mask", 0),
                          ("labels", -100), ("dec_labels", -100), ("enc_mask", False), ("dec_mask", False),
                          ("special_tokens_mask", True)):  # fmt: skip
            if key in b:
                b[key][r, n:] = fill
    return b


def pretrain_batch(method: str) -> dict[str, torch.Tensor]:
    b = shorten(view_for(method, make_batch(batch_size=len(LENGTHS), length=24, seed=3)))
    rng = np.random.default_rng(5)
    q = np.full((len(LENGTHS), 10), PAD, np.int64)
    qm = np.zeros_like(q)
    for r, n in enumerate((1, 10, 3, 7, 2, 10)):  # contexts / LLM queries of other lengths, one of 1
        q[r, :n], qm[r, :n] = np.r_[CLS, rng.integers(5, VOCAB, n - 1)], 1
    qlab = np.where(qm[:, 1:] == 1, q[:, 1:], -100)
    b.update(ctx_input_ids=q, ctx_attention_mask=qm)
    if method == "querygen":  # its decoder reads the queries (next-token labels), not a view of the passage
        b.update(dec_input_ids=q, dec_attention_mask=qm, dec_labels=np.c_[qlab, np.full(len(q), -100)])
    return {k: torch.as_tensor(v) for k, v in b.items()}


def grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def both_ways(model, run):
    """(loss, grads) of ``run(model)`` padded and packed, from the same RNG state."""
    out = []
    for unpad in (False, True):
        model.zero_grad()
        model.unpad = unpad  # a bare encoder: read by ``run``
        set_unpad(model, unpad)
        torch.manual_seed(1)
        loss = run(model)
        loss.backward()
        out.append((loss.detach(), grads(model)))
    return out


def set_unpad(model: torch.nn.Module, unpad: bool) -> None:
    """Every packable part (the objective's encoder, a generator) packed or padded, as the switch does."""
    for m in model.modules():
        if isinstance(m, Unpadded):
            m.unpad = unpad


def assert_same(padded, packed):
    """float32: the loss and the whole gradient to 1e-5 (relative). float64: every parameter's
    gradient to 1e-10 of the whole gradient's norm. Per parameter in float32 would test rounding:
    the token-type and position rows sum a gradient over every token, with cancellation, and a key
    bias's gradient is zero in exact arithmetic (it shifts every score of a query alike)."""
    (l0, g0), (l1, g1) = padded, packed
    exact = l0.dtype == torch.float64
    tol = 1e-10 if exact else TOL
    assert abs(float(l1 - l0)) <= tol * max(1.0, abs(float(l0))), (float(l0), float(l1))
    assert g0.keys() == g1.keys()
    whole = torch.cat([g.reshape(-1) for g in g0.values()])
    assert rel(torch.cat([g1[n].reshape(-1) for n in g0]), whole) <= tol
    if exact:
        worst = max(g0, key=lambda n: float((g1[n] - g0[n]).norm()))
        assert float((g1[worst] - g0[worst]).norm() / whole.norm()) <= tol, worst


def tiny_bert(layers: int = 2, **kw):
    from transformers import BertModel

    torch.manual_seed(0)
    return BertModel(tiny_config(layers=layers, type_vocab_size=2, **kw), add_pooling_layer=False).train()


# ---- the encoder itself ------------------------------------------------------------------------------


def _ids(lengths, width, seed=0):
    rng = np.random.default_rng(seed)
    ids = np.full((len(lengths), width), PAD, np.int64)
    mask = np.zeros_like(ids)
    for r, n in enumerate(lengths):
        ids[r, :n], mask[r, :n] = rng.integers(5, VOCAB, n), 1
        ids[r, 0] = CLS
    return torch.as_tensor(ids), torch.as_tensor(mask)


@pytest.mark.parametrize("dtype", DTYPES)
def test_hidden_states_and_gradients_at_real_tokens(dtype):
    model = tiny_bert(layers=3).to(dtype)
    ids, mask = _ids(LENGTHS, 24)
    types = (torch.arange(24)[None] >= 3).long().expand_as(ids) * mask  # a second segment too
    weights = torch.randn(*ids.shape, 32, generator=torch.Generator().manual_seed(2), dtype=dtype)
    real = mask.bool()

    seen: list = []

    def run(m):
        out = encode_tokens(m, ids, mask, unpad=m.unpad, token_type_ids=types, output_hidden_states=True)
        seen.append(out.hidden_states)
        return sum((s * weights)[real].sum() for s in out.hidden_states)

    padded, packed = both_ways(model, run)
    states = seen[-2:]  # padded, packed
    assert len(states[0]) == len(states[1]) == 4  # embeddings + 3 layers
    for s0, s1 in zip(*states, strict=True):
        assert float((s1[real] - s0[real]).detach().abs().max()) <= (TOL if dtype == torch.float32 else 1e-12)
        assert float(s1[~real].abs().max()) == 0.0  # nothing computed at the padding
    assert_same(padded, packed)


def test_packing_round_trip_and_positions():
    mask = torch.tensor([[1, 0, 0, 0], [1, 1, 1, 1], [1, 1, 0, 0]])
    p = Packing.of(mask)
    assert p.offsets.tolist() == [0, 1, 5, 7] and (p.min_len, p.max_len) == (1, 4)
    assert (p.flat % 4).tolist() == [0, 0, 1, 2, 3, 0, 1]  # positions restart in every row
    x = torch.arange(12.0).view(3, 4, 1)
    assert torch.equal(p.unpack(p.pack(x)), x * mask[..., None])


def test_gradient_checkpointing_keeps_the_packed_gradients():
    model = tiny_bert()
    ids, mask = _ids(LENGTHS, 24)

    def run(m):
        return encode_tokens(m, ids, mask, unpad=True).last_hidden_state[mask.bool()].square().sum()

    plain = both_ways(model, run)[1]
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    assert_same(plain, both_ways(model, run)[1])


# ---- every pre-training objective -------------------------------------------------------------------


@pytest.fixture(scope="module")
def generators(tmp_path_factory):
    """Frozen generators: a BERT masked LM, and an ELECTRA one whose embeddings are projected."""
    from transformers import ElectraConfig, ElectraForMaskedLM

    from pretrain_helpers import tiny_generator

    folder = tmp_path_factory.mktemp("generators")
    torch.manual_seed(3)
    electra = ElectraConfig(vocab_size=VOCAB, embedding_size=16, hidden_size=32, num_hidden_layers=1,
                            num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)  # fmt: skip
    ElectraForMaskedLM(electra).save_pretrained(folder / "electra")
    return {"bert": tiny_generator(folder / "bert"), "electra": str(folder / "electra"), "joint": "joint"}


GENERATED: list[tuple[str, str | None]] = [
    (m, g) for m in ("simlm", "enc-dec-rtd") for g in ("bert", "electra", "joint")
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "method, gen", GENERATED + [(m, None) for m in METHODS if m not in ("simlm", "enc-dec-rtd")]
)
def test_every_objective_packed_equals_padded(method, gen, dtype, generators):
    """Every objective, and simlm / enc-dec-rtd with each kind of generator (its calls packed too)."""
    opts = {"generator": generators[gen]} if gen else {}
    torch.manual_seed(0)
    encoder = tiny_bert()
    model = build_objective(method, encoder, special_ids(), resolve_options(method, MethodOptions(**opts)))
    for m in model.modules():  # a joint generator's config fixes dropout at 0.1: off here, as everywhere
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
        if hasattr(m, "dropout_prob"):  # transformers 4's SDPA attention reads this, not its module
            m.dropout_prob = 0.0
    batch = pretrain_batch(method)
    assert_same(*both_ways(model.to(dtype).train(), lambda m: m(batch)["loss"]))


# ---- fine-tuning: retriever, re-ranker, encoding ----------------------------------------------------


def retriever_batch() -> dict[str, torch.Tensor]:
    q, qm = _ids((1, 7, 3, 12), 12, seed=1)
    p, pm = _ids((1, 20, 2, 9, 20, 5, 13, 4), 20, seed=2)
    return {"q_ids": q, "q_mask": qm, "p_ids": p, "p_mask": pm}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("loss", ["infonce", "simlm", "triplet"])
def test_retriever_packed_equals_padded(loss, dtype):
    from dense_pt.finetune.models import BiEncoder

    # a wide init, as tests/training_helpers.py's: [CLS] vectors far from parallel, else the in-batch
    # scores cancel and float32 rounding alone moves the gradient by 2e-4 (padded as packed)
    model = BiEncoder(tiny_bert(initializer_range=0.3), "cls", loss)
    batch = retriever_batch()
    assert_same(*both_ways(model.to(dtype).train(), lambda m: m(batch)["loss"]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("loss", ["listwise", "simlm"])
def test_reranker_packed_equals_padded(loss, dtype):
    from transformers import BertForSequenceClassification

    from dense_pt.finetune.models import CrossEncoder

    torch.manual_seed(0)
    clf = BertForSequenceClassification(tiny_config(layers=2, type_vocab_size=2, num_labels=1))
    ids, mask = _ids((1, 24, 2, 9, 24, 5, 17, 3), 24, seed=4)
    types = (torch.arange(24)[None] >= 4).long().expand_as(ids) * mask
    model = CrossEncoder(clf, group_size=4, loss=loss, forward_factor=2 if loss == "simlm" else None)
    batch = {"x_ids": ids, "x_mask": mask, "x_types": types}
    assert_same(*both_ways(model.to(dtype).train(), lambda m: m(batch)["loss"]))


def test_encoding_packed_equals_padded():
    from dense_pt.retrieval.encode import _encode_rows

    model = tiny_bert().eval()
    rng = np.random.default_rng(3)
    seqs = [rng.integers(5, VOCAB, n).astype(np.uint32) for n in (0, 1, 30, 7, 2, 19, 30, 0)]
    args = (model, seqs, (CLS, SEP, PAD), 24, 3, "cls", False, "cpu", np.float32, None)
    padded, packed = _encode_rows(*args, unpad=False), _encode_rows(*args, unpad=True)
    assert np.abs(packed - padded).max() <= TOL and np.abs(padded).max() > 0.1


# ---- the switch -------------------------------------------------------------------------------------


def test_switch_resolves_and_refuses_in_one_line(monkeypatch):
    from transformers import RobertaConfig, RobertaModel

    import dense_pt.models.unpad as unpad_module
    from dense_pt.config.train import STEP_SWITCHES, TrainConfig
    from dense_pt.finetune.models import BiEncoder
    from dense_pt.training.switches import apply_switches

    bert = tiny_bert()
    assert "unpad" in STEP_SWITCHES and TrainConfig().unpad == "auto"
    assert resolve_unpad("auto", [bert], "cpu") is False
    assert resolve_unpad("auto", [bert], "cuda") is False  # not measured faster on any GPU yet
    monkeypatch.setattr(unpad_module, "AUTO_UNPAD_DEVICES", ("cuda",))  # once a device check shows it
    assert resolve_unpad("auto", [bert], "cuda") is True
    assert resolve_unpad("on", [bert], "cpu") is True
    assert resolve_unpad("off", [bert], "cuda") is False
    roberta = RobertaModel(RobertaConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, intermediate_size=64))  # fmt: skip
    assert resolve_unpad("auto", [roberta], "cuda") is False  # falls back to the padded path
    with pytest.raises(InvalidArgumentError, match="RobertaModel") as err:
        resolve_unpad("on", [roberta], "cpu")
    assert "\n" not in str(err.value)
    model = BiEncoder(bert, "cls", "infonce")
    apply_switches(model, TrainConfig(unpad="on"), torch.device("cpu"))
    assert model.unpad is True
    apply_switches(model, TrainConfig(), torch.device("cpu"))
    assert model.unpad is False  # auto: padded on CPU


def test_encode_command_packed_equals_padded(tmp_path):
    """``dense-pt encode``'s function with ``unpad`` on and off: the same embeddings, store and queries."""
    from dense_pt.retrieval.encode import Embeddings, encode
    from retrieval_fixtures import tiny_setup

    beir, model, store, _, _ = tiny_setup(tmp_path)
    for source, kind in ((store, "p"), (beir / "queries.jsonl", "q")):
        got = {}
        for unpad in ("off", "on"):
            out = encode(
                model,
                source,
                tmp_path / f"{kind}-{unpad}",
                EncodeSettings(dtype="float32", unpad=unpad),
                progress=False,
            )
            got[unpad] = Embeddings.open(out).load_all()
        assert got["on"][0] == got["off"][0]
        assert np.abs(got["on"][1] - got["off"][1]).max() <= TOL


def test_encode_refuses_unpad_on_for_another_model(tmp_path):
    from transformers import RobertaConfig, RobertaModel

    from dense_pt.retrieval.encode import encode
    from retrieval_fixtures import tiny_setup

    beir, model, _, _, _ = tiny_setup(tmp_path)
    RobertaModel(RobertaConfig(vocab_size=4000, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=64)).save_pretrained(model)  # fmt: skip
    with pytest.raises(InvalidArgumentError, match="RobertaModel"):
        encode(model, beir / "queries.jsonl", tmp_path / "q", EncodeSettings(unpad="on"), progress=False)


# ---- cached gradients (GradCache) over packed encoders -------------------------------------------


@pytest.mark.parametrize("case", ["simlm", "infonce", "contrastive"])
def test_cached_packed_equals_uncached_padded(case):
    """float64: the cached step over packed encoder calls gives the padded full-batch gradient; with
    dropout on, it replays its own masks (the graph-free pass and the graph pass draw alike)."""
    from dense_pt.training.cache import cached_backward
    from test_cached_gradients import fixed_mask_reference
    from training_helpers import build, global_batch, gradient

    batch = global_batch(case)
    full = build(case)
    full(batch)["loss"].backward()
    cached = build(case)
    set_unpad(cached, True)
    cached_backward(cached, batch, 4)
    assert rel(gradient(cached), gradient(full)) <= 1e-10
    ref, cached = build(case, dropout=0.2), build(case, dropout=0.2)
    set_unpad(ref, True)
    set_unpad(cached, True)
    torch.manual_seed(5)
    fixed_mask_reference(ref, batch, 4)
    torch.manual_seed(5)
    cached_backward(cached, batch, 4)
    assert rel(gradient(cached), gradient(ref)) <= 1e-10
