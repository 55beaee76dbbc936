"""Every pre-training objective on a tiny random BERT and hand-built batches: it trains (loss falls
on a fixed batch), and the method-specific invariants hold."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)  # the CI machine is shared: idle-spinning thread pools cost far more than they give

from dense_pt.errors import InvalidArgumentError  # noqa: E402
from dense_pt.models import band_keep  # noqa: E402
from dense_pt.objectives import METHODS, MethodOptions, build_objective, resolve_options  # noqa: E402
from dense_pt.training import TrainConfig, build_optimizer, to_device  # noqa: E402
from pretrain_helpers import MASK, VOCAB, make_batch, special_ids, tiny_encoder, view_for  # noqa: E402


def build(method, dropout=0.0, **opts):
    torch.manual_seed(0)
    return build_objective(
        method, tiny_encoder(dropout), special_ids(), resolve_options(method, MethodOptions(**opts))
    )


# querygen / contrastive read query / context keys: tests/test_expand_objectives.py covers them.
@pytest.mark.parametrize("method", [m for m in METHODS if m not in ("querygen", "contrastive")])
def test_loss_falls_on_a_fixed_batch(method):
    model = build(method)
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


def test_simlm_replaced_positions_are_nested_and_never_special():
    model = build("simlm")
    batch = to_device(view_for("simlm", make_batch(batch_size=16, length=30, seed=2)), torch.device("cpu"))
    with torch.no_grad():
        original, x_enc, x_dec, _ = model.make_views(batch)
    enc_mask, dec_mask = batch["enc_mask"], batch["dec_mask"]
    # Changes only where masked; encoder changes a subset of decoder changes, with the same token.
    assert not ((x_enc != original) & ~enc_mask).any()
    assert not ((x_dec != original) & ~dec_mask).any()
    assert (x_dec[enc_mask] == x_enc[enc_mask]).all()
    # No [MASK] (or other special token) is ever sampled into either input.
    special = torch.tensor(special_ids().all())
    assert not torch.isin(x_enc[dec_mask], special).any()
    assert not torch.isin(x_dec[dec_mask], special).any()
    assert not (x_enc == MASK).any() and not (x_dec == MASK).any()
    assert (x_dec[dec_mask] < VOCAB).all()
    # A random generator replaces almost every masked token with something else.
    assert (x_dec != original)[dec_mask].float().mean() > 0.8


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
    changed = {}
    with torch.no_grad():
        h = model.bottleneck(model.encode(batch["input_ids"], am).last_hidden_state[:, 0])
        base = model.decode(h, batch["dec_input_ids"], am)
        for j in range(1, 14):
            perturbed = batch["dec_input_ids"].clone()
            perturbed[:, j] = (perturbed[:, j] + 7) % (VOCAB - 5) + 5
            out = model.decode(h, perturbed, am)
            # Masked keys contribute exactly 0, so "unchanged" is bitwise; tiny real effects count.
            changed[j] = not torch.equal(out[:, t], base[:, t])
    return changed


@pytest.mark.parametrize("span", [1, 2, 3])
def test_seed_strict_window_sees_exactly_the_previous_k_tokens(span):
    """State 9 predicts token 10 from h_cls and tokens 10-k .. 9 only, through all 3 layers."""
    model = build("seed", attention_span=span)
    assert len(model.decoder.layers) == 3
    changed = _window_dependence(model, t=9)
    for j, c in changed.items():
        assert c == (9 - span < j <= 9), (j, span, changed)


@pytest.mark.parametrize("span", [1, 2])
def test_seed_band_mask_receptive_field(span):
    """The single-pass band mask: exactly k tokens with one layer, n(k-1)+1 with n layers."""
    one = build("seed", attention_span=span, seed_window="band", decoder_layers=1)
    for j, c in _window_dependence(one, t=9).items():
        assert c == (9 - span < j <= 9), (j, span)
    three = build("seed", attention_span=span, seed_window="band")
    reach = 3 * (span - 1) + 1
    for j, c in _window_dependence(three, t=9).items():
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
    with pytest.raises(InvalidArgumentError, match="p_enc <= p_dec"):
        resolve_options("simlm", MethodOptions(p_enc=0.6, p_dec=0.5))
    with pytest.raises(InvalidArgumentError, match="uses no generator"):
        resolve_options("cdmae", MethodOptions(generator="joint"))
    with pytest.raises(InvalidArgumentError, match=r"p_enc must lie in \[0, 1\]"):
        resolve_options("mlm", MethodOptions(p_enc=1.5))
    assert resolve_options("seed").attention_span == 2
    assert resolve_options("cdmae").projection is True


def test_frozen_generator_from_a_folder(tmp_path):
    from transformers import BertForMaskedLM

    from pretrain_helpers import tiny_config

    BertForMaskedLM(tiny_config(layers=1)).save_pretrained(tmp_path / "gen")
    model = build("simlm", generator=str(tmp_path / "gen"))
    assert not model.generator.joint
    assert not any(p.requires_grad for p in model.generator.parameters())
    opt_params = {id(p) for g in build_optimizer(model, TrainConfig()).param_groups for p in g["params"]}
    assert not any(id(p) in opt_params for p in model.generator.parameters())
    model.train()
    assert not model.generator.mlm.training  # a frozen generator never runs dropout
    batch = to_device(view_for("simlm", make_batch(seed=9)), torch.device("cpu"))
    out = model(batch)
    assert "loss_gen" not in out
    out["loss"].backward()
    assert all(p.grad is None for p in model.generator.parameters())


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


@pytest.mark.parametrize("method", ["simlm", "cdmae", "seed", "condenser", "enc-dec-rtd", "autoencoder"])
def test_runs_under_bf16_autocast(method):
    """The mixed-precision path (bf16 autocast, as on a GPU) keeps every dtype consistent."""
    model = build(method)
    batch = to_device(view_for(method, make_batch(seed=10)), torch.device("cpu"))
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        out = model(batch)
    assert torch.isfinite(out["loss"])
    out["loss"].backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize("method", ["seed", "cdmae"])
def test_eager_and_sdpa_attention_agree(method):
    """The explicit decoder masks mean the same under both attention implementations."""
    sdpa = build(method)
    eager = build(method)
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
