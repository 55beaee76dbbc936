"""Every pre-training objective on a tiny random BERT and hand-built batches: it trains (loss falls
on a fixed batch), and the method-specific invariants hold."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)  # the CI machine is shared: idle-spinning thread pools cost far more than they give

from dense_pt.errors import InvalidArgumentError  # noqa: E402
from dense_pt.models import band_keep  # noqa: E402
from dense_pt.objectives import METHODS, MethodOptions, build_objective, resolve_options  # noqa: E402
from dense_pt.training import TrainConfig, build_optimizer, to_device  # noqa: E402
from pretrain_helpers import MASK, VOCAB, make_batch, special_ids, tiny_encoder, view_for  # noqa: E402

GENERATOR = None  # the frozen generator's folder, made once by the fixture below


@pytest.fixture(scope="module", autouse=True)
def frozen_generator(tmp_path_factory):
    """A tiny random masked LM saved as a local folder: the frozen generator (the paper's setting)
    of every simlm / enc-dec-rtd test here."""
    global GENERATOR
    from pretrain_helpers import tiny_generator

    GENERATOR = tiny_generator(tmp_path_factory.mktemp("generator") / "gen")
    return GENERATOR


def build(method, dropout=0.0, **opts):
    torch.manual_seed(0)
    if method in ("simlm", "enc-dec-rtd"):
        opts.setdefault("generator", GENERATOR)
    return build_objective(
        method, tiny_encoder(dropout), special_ids(), resolve_options(method, MethodOptions(**opts))
    )


# querygen / contrastive read query / context keys: tests/test_expand_objectives.py covers them.
@pytest.mark.parametrize(
    "method, opts",
    [(m, {}) for m in METHODS if m not in ("querygen", "contrastive")]
    + [("seed", {"seed_window": "released"}), ("simlm", {"generator": "joint"})],
)
def test_loss_falls_on_a_fixed_batch(method, opts):
    model = build(method, **opts)
    batch = to_device(view_for(method, make_batch(seed=1)), torch.device("cpu"))
    opt = build_optimizer(model, TrainConfig(lr=3e-3, weight_decay=0.0))
    model.train()
    losses = []
    for _ in range(40):
        opt.zero_grad()
        out = model(batch)
        out["loss"].backward()
        opt.step()
        losses.append(out["loss"].item())
    assert np.isfinite(losses).all()
    first, last = np.mean(losses[:3]), np.mean(losses[-3:])
    assert last < 0.6 * first, (method, losses[:3], losses[-3:])


def _generator_inputs(model, batch):
    """The generator's input ids of each call during ``make_views``."""
    calls = []
    handle = model.generator.mlm.register_forward_pre_hook(
        lambda m, args, kwargs: calls.append(kwargs["input_ids"].clone()), with_kwargs=True
    )
    with torch.no_grad():
        views = model.make_views(batch)
    handle.remove()
    return calls, views


@pytest.mark.parametrize("method", ["simlm", "enc-dec-rtd"])
def test_generator_samples_twice(method):
    """SimLM eq. 1: x_enc = Sample(G, Mask(x, 30%)), x_dec = Sample(G, Mask(x, 50%)): two generator
    calls, on the encoder's view (floor(n * 0.3) [MASK]) and on the decoder's (floor(n * 0.5)), so
    x_enc and x_dec hold independent samples at the encoder's positions. (The old code called the
    generator once on the 50% view and copied its samples into x_enc.)"""
    model = build(method)
    batch = to_device(view_for(method, make_batch(batch_size=16, length=30, seed=2)), torch.device("cpu"))
    calls, (original, x_enc, x_dec, _) = _generator_inputs(model, batch)
    assert len(calls) == 2
    content = batch["attention_mask"].bool() & ~batch["special_tokens_mask"]
    n = content.sum(1)
    enc_in, dec_in = calls
    assert ((enc_in == MASK).sum(1) == (n * 0.3).floor().long()).all()
    assert ((dec_in == MASK).sum(1) == (n * 0.5).floor().long()).all()
    enc_mask, dec_mask = batch["enc_mask"], batch["dec_mask"]
    assert torch.equal(enc_in == MASK, enc_mask) and torch.equal(dec_in == MASK, dec_mask)
    assert not (enc_mask & ~dec_mask).any()  # nested
    # Changes only where masked, never a special token, never an id outside the vocabulary.
    assert not ((x_enc != original) & ~enc_mask).any()
    assert not ((x_dec != original) & ~dec_mask).any()
    special = torch.tensor(special_ids().all())
    assert not torch.isin(x_enc[enc_mask], special).any() and not torch.isin(x_dec[dec_mask], special).any()
    assert (x_dec[dec_mask] < VOCAB).all() and (x_enc[enc_mask] < VOCAB).all()
    # A random generator replaces almost every masked token with something else ...
    assert (x_dec != original)[dec_mask].float().mean() > 0.8
    # ... and its two samples disagree at most of the encoder's positions.
    assert (x_enc != x_dec)[enc_mask].float().mean() > 0.5


@pytest.mark.parametrize("weight", [0.2, 1.0])
def test_joint_generator_loss_weight(weight):
    model = build("simlm", generator="joint", generator_weight=weight)
    assert model.generator.joint
    batch = to_device(view_for("simlm", make_batch(seed=12)), torch.device("cpu"))
    model.train()
    out = model(batch)
    want = out["loss_enc"] + out["loss_dec"] + weight * out["loss_gen"]
    torch.testing.assert_close(out["loss"].detach(), want)
    # the generator learns from its loss on the encoder's view only
    out["loss"].backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.generator.parameters())


def test_simlm_predicts_every_non_special_token():
    model = build("simlm")
    batch = to_device(view_for("simlm", make_batch(seed=3)), torch.device("cpu"))
    targets = model.every_token_labels(batch, batch["input_ids"])
    keep = batch["attention_mask"].bool() & ~batch["special_tokens_mask"]
    assert ((targets != -100) == keep).all()


def test_cdmae_projection_and_ablation():
    assert isinstance(build("cdmae").bottleneck, torch.nn.Linear)
    assert isinstance(build("cdmae", projection=False).bottleneck, torch.nn.Identity)
    assert isinstance(build("simlm").bottleneck, torch.nn.Identity)


def test_cdmae_decoder_reads_only_its_own_view():
    """The decoder loss is computed on dec_labels: positions chosen by importance, not by the
    encoder's random mask. Changing the importance changes which tokens the decoder predicts."""
    model = build("cdmae")
    model.eval()
    imp_a = np.tile(np.arange(20, dtype=np.float32), (6, 1))
    imp_b = imp_a[:, ::-1].copy()
    a = make_batch(seed=4, importance=imp_a)
    b = make_batch(seed=4, importance=imp_b)
    assert not np.array_equal(a["dec_labels"], b["dec_labels"])
    np.testing.assert_array_equal(a["labels"], b["labels"])
    with torch.no_grad():
        la = model(to_device(a, torch.device("cpu")))
        lb = model(to_device(b, torch.device("cpu")))
    assert la["loss_enc"] == lb["loss_enc"]
    assert la["loss_dec"] != lb["loss_dec"]


def test_decoders_start_from_the_right_weights():
    simlm = build("simlm")
    enc_last = simlm.encoder.encoder.layer[-1].state_dict()
    for k, v in simlm.decoder.layers[-1].state_dict().items():
        torch.testing.assert_close(v, enc_last[k])
    cdmae = build("cdmae")
    w_dec = cdmae.decoder.layers[-1].attention.self.query.weight
    w_enc = cdmae.encoder.encoder.layer[-1].attention.self.query.weight
    assert not torch.allclose(w_dec, w_enc)
    assert len(build("seed").decoder.layers) == 3


def _window_dependence(model, t=9, length=16):
    """For each token j, whether perturbing original token j changes decoder state t."""
    model.eval()
    batch = to_device(view_for("seed", make_batch(batch_size=2, length=length, seed=5)), torch.device("cpu"))
    am = batch["attention_mask"]
    assert am[:, : t + 2].all()
    changed: dict[int | str, bool] = {}  # token j, or "h" (the bottleneck vector)
    with torch.no_grad():
        h = model.bottleneck(model.encode(batch["input_ids"], am).last_hidden_state[:, 0])
        base = model.decode(h, batch["dec_input_ids"], am)
        for j in range(1, 14):
            perturbed = batch["dec_input_ids"].clone()
            perturbed[:, j] = (perturbed[:, j] + 7) % (VOCAB - 5) + 5
            out = model.decode(h, perturbed, am)
            # Masked keys contribute exactly 0, so "unchanged" is bitwise; tiny real effects count.
            changed[j] = not torch.equal(out[:, t], base[:, t])
        changed["h"] = not torch.equal(model.decode(h + 0.5, batch["dec_input_ids"], am)[:, t], base[:, t])
    return changed


@pytest.mark.parametrize("span", [1, 2, 3])
def test_seed_strict_window_sees_exactly_the_previous_k_tokens(span):
    """State 9 predicts token 10 from h_cls and tokens 10-k .. 9 only, through all 3 layers."""
    model = build("seed", attention_span=span)
    assert len(model.decoder.layers) == 3
    changed = _window_dependence(model, t=9)
    assert changed.pop("h")
    for j, c in changed.items():
        assert c == (9 - span < j <= 9), (j, span, changed)


@pytest.mark.parametrize("span", [1, 2, 3])
def test_seed_released_decoder_receptive_field(span):
    """The authors' architecture: h_cls enters every layer through cross-attention; self-attention
    under the per-layer band mask of ``buffered_future_mask`` (k tokens per layer), so 3 layers see
    3(k-1)+1 tokens; a token outside them leaves the prediction bitwise unchanged."""
    model = build("seed", attention_span=span, seed_window="released")
    assert len(model.decoder.layers) == 3
    assert all(hasattr(layer, "crossattention") for layer in model.decoder.layers)
    changed = _window_dependence(model, t=9)
    assert changed.pop("h")  # the bottleneck reaches the prediction
    reach = 3 * (span - 1) + 1
    for j, c in changed.items():
        assert c == (9 - reach < j <= 9), (j, span, changed)


@pytest.mark.parametrize("span", [1, 2])
def test_seed_band_mask_receptive_field(span):
    """The single-pass band mask: exactly k tokens with one layer, n(k-1)+1 with n layers."""
    one = build("seed", attention_span=span, seed_window="band", decoder_layers=1)
    changed = _window_dependence(one, t=9)
    assert changed.pop("h")
    for j, c in changed.items():
        assert c == (9 - span < j <= 9), (j, span)
    three = build("seed", attention_span=span, seed_window="band")
    reach = 3 * (span - 1) + 1
    changed = _window_dependence(three, t=9)
    assert changed.pop("h")
    for j, c in changed.items():
        assert c == (9 - reach < j <= 9), (j, span)


def test_seed_strict_and_band_agree_for_one_layer():
    strict = build("seed", decoder_layers=1)
    band = build("seed", decoder_layers=1, seed_window="band")
    band.load_state_dict(strict.state_dict())
    strict.eval()
    band.eval()
    batch = to_device(view_for("seed", make_batch(seed=8)), torch.device("cpu"))
    with torch.no_grad():
        a, b = strict(batch), band(batch)
    torch.testing.assert_close(a["loss"], b["loss"], rtol=1e-5, atol=1e-5)


def test_band_keep_pattern():
    keep = band_keep(6, 2)[0, 0]
    expected = torch.tensor(
        [
            [1, 0, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 0],
            [1, 1, 1, 0, 0, 0],
            [1, 0, 1, 1, 0, 0],
            [1, 0, 0, 1, 1, 0],
            [1, 0, 0, 0, 1, 1],
        ],
        dtype=torch.bool,
    )
    assert torch.equal(keep, expected)


def test_seed_next_token_labels():
    model = build("seed")
    ids = torch.tensor([[2, 10, 11, 3, 0]])
    am = torch.tensor([[1, 1, 1, 1, 0]])
    assert model.next_token_labels(ids, am).tolist() == [[10, 11, 3, -100, -100]]


def test_condenser_head_reads_early_layer_and_final_cls():
    model = build("condenser")
    assert model.early == 1  # 3-layer encoder: the middle layer
    with pytest.raises(ValueError, match="condenser_layer"):
        build("condenser", condenser_layer=3)


def test_autoencoder_decoder_input_is_all_mask():
    model = build("autoencoder")
    captured = {}

    def hook(_module, args, _kwargs):
        captured["ids"] = args[0] if args else _kwargs["input_ids"]

    handle = model.encoder.embeddings.register_forward_pre_hook(
        lambda m, a, k: captured.setdefault("calls", []).append(k["input_ids"]), with_kwargs=True
    )
    batch = to_device(view_for("autoencoder", make_batch(seed=6)), torch.device("cpu"))
    with torch.no_grad():
        model(batch)
    handle.remove()
    enc_in, dec_in = captured["calls"]
    assert torch.equal(enc_in, batch["original_ids"])
    content = batch["attention_mask"].bool() & ~batch["special_tokens_mask"]
    assert (dec_in[content] == MASK).all() and torch.equal(dec_in[~content], batch["original_ids"][~content])


def test_option_validation():
    with pytest.raises(InvalidArgumentError, match="unknown method"):
        resolve_options("bert")
    # No silent generator: the message says what the paper used and what to pass.
    for method in ("simlm", "enc-dec-rtd"):
        with pytest.raises(InvalidArgumentError, match=r"needs --generator: .*electra-base-generator.*joint"):
            resolve_options(method)
    with pytest.raises(InvalidArgumentError, match="simlm has no option sigma"):
        resolve_options("simlm", MethodOptions(generator="joint", sigma=1.0))
    with pytest.raises(InvalidArgumentError, match="generator_fill"):
        resolve_options("simlm", MethodOptions(generator="joint", generator_fill="zero"))  # type: ignore[arg-type]  # bad on purpose
    with pytest.raises(InvalidArgumentError, match="p_enc <= p_dec"):
        resolve_options("simlm", MethodOptions(p_enc=0.6, p_dec=0.5, generator="joint"))
    with pytest.raises(InvalidArgumentError, match="uses no generator"):
        resolve_options("cdmae", MethodOptions(generator="joint"))
    with pytest.raises(InvalidArgumentError, match=r"p_enc: must be <= 1, got 1.5"):
        resolve_options("mlm", MethodOptions(p_enc=1.5))
    assert resolve_options("seed").attention_span == 2
    assert resolve_options("cdmae").projection is True


def test_frozen_generator_from_a_folder(frozen_generator):
    model = build("simlm", generator=frozen_generator)
    assert not model.generator.joint
    assert not any(p.requires_grad for p in model.generator.parameters())
    opt_params = {id(p) for g in build_optimizer(model, TrainConfig()).param_groups for p in g["params"]}
    assert not any(id(p) in opt_params for p in model.generator.parameters())
    model.train()
    assert not model.generator.mlm.training  # a frozen generator never runs dropout
    batch = to_device(view_for("simlm", make_batch(seed=9)), torch.device("cpu"))
    out = model(batch)
    assert "loss_gen" not in out
    torch.testing.assert_close(out["loss"].detach(), out["loss_enc"] + out["loss_dec"])
    out["loss"].backward()
    assert all(p.grad is None for p in model.generator.parameters())


def test_generator_by_hub_name_from_the_local_cache(frozen_generator, tmp_path):
    """A hub name resolves to its snapshot in the local Hugging Face cache (laid out as the hub
    client writes it); a name not in the cache is refused with what to do, never downloaded."""
    import shutil

    from dense_pt.models.generator import resolve_generator

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--tiny-org--tiny-generator"
    shutil.copytree(frozen_generator, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    folder = resolve_generator("tiny-org/tiny-generator", cache_dir=tmp_path / "hub")
    assert isinstance(folder, Path)
    assert folder == repo / "snapshots" / commit and (folder / "config.json").is_file()
    with pytest.raises(FileNotFoundError, match=r"local Hugging Face cache.*hf download"):
        resolve_generator("tiny-org/not-there", cache_dir=tmp_path / "hub")
    assert resolve_generator("joint") == "joint"
    assert resolve_generator(frozen_generator) == Path(frozen_generator)


def test_mlm_head_loads_a_checkpoints_prediction_head(tmp_path):
    from transformers import BertForMaskedLM

    from dense_pt.models import load_encoder
    from pretrain_helpers import tiny_config

    torch.manual_seed(3)
    mlm = BertForMaskedLM(tiny_config())
    with torch.no_grad():
        mlm.cls.predictions.bias.normal_()
    mlm.save_pretrained(tmp_path / "ckpt")
    enc = load_encoder(tmp_path / "ckpt")
    model = build_objective("mlm", enc, special_ids(), resolve_options("mlm"))
    assert model.lm_head.init_from_checkpoint(tmp_path / "ckpt")
    model.eval()
    mlm.eval()
    ids = torch.randint(5, VOCAB, (2, 10))
    am = torch.ones_like(ids)
    with torch.no_grad():
        ref = mlm(input_ids=ids, attention_mask=am).logits
        ours = model.lm_head(model.encode(ids, am).last_hidden_state)
    torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-4)
    # all-MiniLM-L6-v2 style: no head in the checkpoint -> reported, transform stays random.
    from transformers import AutoModel

    AutoModel.from_config(tiny_config()).save_pretrained(tmp_path / "bare")
    assert not model.lm_head.init_from_checkpoint(tmp_path / "bare")


@pytest.mark.parametrize(
    "method, opts",
    [
        ("simlm", {}),
        ("simlm", {"generator": "joint"}),
        ("cdmae", {}),
        ("seed", {}),
        ("seed", {"seed_window": "released"}),
        ("condenser", {}),
        ("enc-dec-rtd", {}),
        ("autoencoder", {}),
    ],
)
def test_runs_under_bf16_autocast(method, opts):
    """The mixed-precision path (bf16 autocast, as on a GPU) keeps every dtype consistent."""
    model = build(method, **opts)
    batch = to_device(view_for(method, make_batch(seed=10)), torch.device("cpu"))
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        out = model(batch)
    assert torch.isfinite(out["loss"])
    out["loss"].backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize("method, opts", [("seed", {}), ("seed", {"seed_window": "released"}), ("cdmae", {})])
def test_eager_and_sdpa_attention_agree(method, opts):
    """The explicit decoder masks mean the same under both attention implementations."""
    sdpa = build(method, **opts)
    eager = build(method, **opts)
    eager.load_state_dict(sdpa.state_dict())
    for m in eager.modules():
        if hasattr(getattr(m, "config", None), "_attn_implementation"):
            m.config._attn_implementation = "eager"
    assert eager.decoder.attn_implementation() == "eager" and sdpa.decoder.attn_implementation() == "sdpa"
    sdpa.eval()
    eager.eval()
    batch = to_device(view_for(method, make_batch(seed=11)), torch.device("cpu"))
    with torch.no_grad():
        a, b = sdpa(batch), eager(batch)
    torch.testing.assert_close(a["loss"], b["loss"], rtol=1e-4, atol=1e-4)


def test_build_objective_without_a_generator_is_one_clear_error():
    """build_objective on options not passed through resolve_options (the Python API): SimLM without
    a generator was a TypeError from Path(None); now the same line resolve_options gives."""
    with pytest.raises(InvalidArgumentError, match="simlm needs a generator"):
        build_objective("simlm", tiny_encoder(), special_ids(), MethodOptions())
