"""Continued pre-training of a sentence model keeps its pooling (issue 15 §2): the bottleneck reads
the checkpoint's own pooling (``pooling="auto"``), the choice is recorded in the exported encoder,
and fine-tuning / encoding / sentence-transformers then read the vector that was trained."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)
pytest.importorskip("dense_pt.collate")

from dense_pt.config.options import BottleneckPooling  # noqa: E402
from dense_pt.errors import InvalidArgumentError  # noqa: E402
from dense_pt.objectives import METHODS, MethodOptions, profile, resolve_options, resolve_pooling  # noqa: E402
from dense_pt.pretrain import build_config, run_pretrain  # noqa: E402
from dense_pt.retrieval.encoder import detect_spec, write_pooling_modules  # noqa: E402
from pretrain_helpers import special_ids, tiny_config, tiny_config_file, tiny_encoder, tiny_store  # noqa: E402

BOTTLENECK_METHODS = [m for m in METHODS if m != "mlm"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    base = tmp_path_factory.mktemp("pooled")
    store = tiny_store(base / "store")
    config = tiny_config_file(base / "tiny.json", store)
    return base, store, config


def sentence_model(folder, store, pooling: str, normalize: bool) -> str:
    """A tiny random checkpoint with the store's tokenizer and sentence-transformers module files,
    like all-MiniLM-L6-v2 (mean pooling + normalisation)."""
    import shutil

    from transformers import AutoModel

    cfg = tiny_config(layers=2, vocab_size=store.vocab_size, pad_token_id=store.special_tokens["pad"])
    cfg.max_position_embeddings = 160
    torch.manual_seed(0)
    AutoModel.from_config(cfg).save_pretrained(folder)
    shutil.copy(store.tokenizer_path, folder / "tokenizer.json")
    write_pooling_modules(folder, cfg.hidden_size, pooling, normalize, 128)
    return str(folder)


@pytest.mark.parametrize("method", BOTTLENECK_METHODS)
def test_every_bottleneck_method_has_the_option_default_auto(method):
    assert profile(method).options["pooling"].value == "auto"
    gen = "joint" if "generator" in profile(method).options else None
    assert resolve_options(method, MethodOptions(pooling="mean", generator=gen)).pooling == "mean"


def test_methods_without_a_bottleneck_refuse_it_and_bad_values_are_refused():
    with pytest.raises(InvalidArgumentError, match="mlm has no option pooling"):
        resolve_options("mlm", MethodOptions(pooling="mean"))
    with pytest.raises(InvalidArgumentError, match="pooling: must be one of auto, cls or mean"):
        resolve_options("cdmae", MethodOptions(pooling="max"))  # type: ignore[arg-type]  # bad on purpose


def test_bottleneck_vector_is_the_masked_mean_or_cls():
    from dense_pt.objectives import build_objective

    rng = np.random.default_rng(0)
    seq = torch.from_numpy(rng.standard_normal((3, 7, 32)).astype(np.float32))
    am = torch.tensor([[1] * 7, [1] * 4 + [0] * 3, [1] * 2 + [0] * 5])
    cases: list[tuple[BottleneckPooling, np.ndarray]] = [
        ("cls", seq[:, 0].numpy()),
        ("mean", np.stack([seq[i, : int(am[i].sum())].numpy().mean(0) for i in range(3)])),
    ]
    for pooling, ref in cases:
        opts = resolve_options("cdmae", MethodOptions(pooling=pooling, projection=False))
        obj = build_objective("cdmae", tiny_encoder(), special_ids(), opts)
        np.testing.assert_allclose(obj.bottleneck_vector(seq, am).detach().numpy(), ref, rtol=1e-5, atol=1e-6)
    # "auto" around an encoder in memory (no checkpoint folder): [CLS], the papers'
    obj = build_objective("cdmae", tiny_encoder(), special_ids(), resolve_options("cdmae"))
    assert obj.opts.pooling == "cls"


def test_auto_reads_the_checkpoints_pooling(setup, tmp_path):
    _, store, config = setup
    mean = sentence_model(tmp_path / "mean", store, "mean", True)
    cls = sentence_model(tmp_path / "cls", store, "cls", False)
    auto = MethodOptions(pooling="auto")
    assert resolve_pooling(auto, mean).pooling == "mean"
    assert resolve_pooling(auto, cls).pooling == "cls"
    assert resolve_pooling(auto, config).pooling == "cls"  # a bare config: BERT-style, the papers' [CLS]
    assert resolve_pooling(MethodOptions(pooling="cls"), mean).pooling == "cls"  # explicit wins


def _pretrain(setup, model, out, pooling=None, method="cdmae"):
    _, store, _ = setup
    top = {"method": method, "model": model, "corpus": str(store.path), "out": str(out), "max_length": 48}
    train = {"max_steps": 2, "batch_size": 4, "lr": 1e-3, "save_every": 2, "log_every": 1, "warmup": 1}
    cfg = build_config(top=top, options={"pooling": pooling}, train=train)
    run_pretrain(cfg, progress=False)
    return cfg


@pytest.mark.parametrize("pooling, expect", [(None, "mean"), ("cls", "cls")])
def test_pretraining_a_sentence_model_records_its_pooling(setup, tmp_path, pooling, expect):
    from sentence_transformers import SentenceTransformer

    _, store, _ = setup
    model = sentence_model(tmp_path / "model", store, "mean", True)
    cfg = _pretrain(setup, model, tmp_path / "run", pooling)
    assert cfg.options.pooling == expect
    run_config = json.loads((tmp_path / "run" / "run_config.json").read_text())
    assert run_config["options"]["pooling"] == expect
    enc = tmp_path / "run" / "encoder"
    spec = detect_spec(enc)
    assert (spec.pooling, spec.normalize) == (expect, True)  # normalisation stays the checkpoint's
    st = SentenceTransformer(str(enc), device="cpu")
    assert st[1].get_config_dict()["pooling_mode"] == expect


def test_the_exported_encoder_pools_as_the_bottleneck_did(setup, tmp_path):
    """The vector the decoder read during pre-training is the vector encoding produces."""
    from dense_pt.pretrain import load_objective
    from dense_pt.retrieval.encoder import load_backbone, pool

    _, store, _ = setup
    model = sentence_model(tmp_path / "model", store, "mean", True)
    _pretrain(setup, model, tmp_path / "run")
    obj = load_objective(tmp_path / "run").eval()
    ids = torch.tensor([[2, 11, 12, 13, 3, 0], [2, 14, 15, 3, 0, 0]])
    am = (ids != 0).long()
    ids = ids.clamp(max=store.vocab_size - 1)
    with torch.no_grad():
        trained = obj.pooled(obj.encode(ids, am).last_hidden_state, am)
        backbone = load_backbone(tmp_path / "run" / "encoder")
        spec = detect_spec(tmp_path / "run" / "encoder")
        encoded = pool(backbone(input_ids=ids, attention_mask=am).last_hidden_state, am, spec.pooling, False)
    assert spec.pooling == "mean"
    torch.testing.assert_close(encoded, trained, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("pooling", "normalize"), [("cls", False), ("mean", True), ("mean", False)])
def test_without_sentence_transformers_the_classic_module_files_load_alike(
    setup, tmp_path, monkeypatch, pooling, normalize
):
    """A machine without sentence-transformers (a lent GPU machine: it needs scipy) writes the
    classic module files itself: dense-pt detects the same pooling, and sentence-transformers loads
    the folder and embeds exactly as the folder it wrote itself."""
    import sys

    from sentence_transformers import SentenceTransformer

    _, store, _ = setup
    own = sentence_model(tmp_path / "own", store, pooling, normalize)
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "sentence_transformers", None)  # `import` raises ImportError
        classic = sentence_model(tmp_path / "classic", store, pooling, normalize)
    assert json.loads((tmp_path / "classic" / "modules.json").read_text())[1]["type"].endswith(
        "models.Pooling"
    )
    spec = detect_spec(classic)
    assert spec == detect_spec(own) and (spec.pooling, spec.normalize) == (pooling, normalize)
    texts = ["alpha beta gamma", "delta", "epsilon zeta eta theta iota"]
    a = SentenceTransformer(own, device="cpu").encode(texts, convert_to_numpy=True)
    b = SentenceTransformer(classic, device="cpu").encode(texts, convert_to_numpy=True)
    assert SentenceTransformer(classic, device="cpu").max_seq_length == 128
    np.testing.assert_array_equal(a, b)
