"""The native collator reads its settings by name (a mapping, or a model's attributes) and parses
the choices with the core's `FromStr`: a bad name is an InvalidArgumentError naming the setting
and listing the valid names; a setting a view needs and lacks is refused by its name."""

from __future__ import annotations

from typing import TypedDict

import pytest

from dense_pt import _native
from dense_pt.config.collate import CollatorSettings
from dense_pt.errors import InvalidArgumentError


class Tokens(TypedDict):
    vocab_size: int
    special_tokens: dict[str, int]


TOKENS = Tokens(vocab_size=20, special_tokens={"pad": 0, "cls": 1, "sep": 2, "mask": 3})
# every setting the core reads, as CollatorSettings names them (cdmae's paper values)
SETTINGS = {
    **CollatorSettings().model_dump(),
    "max_length": 8,
    "crop": "random",
    "p_enc": 0.3,
    "p_dec": 0.5,
    "sigma": 1.0,
    "whole_word": False,
    "mask_prob": 0.8,
    "random_prob": 0.1,
}


@pytest.mark.parametrize(
    ("method", "option", "message"),
    [
        ("mlm", {"crop": "tail"}, "crop: unknown crop \"tail\" (expected one of 'head', 'random')"),
        (
            "mlm",
            {"pad_to": "shortest"},
            "pad_to: unknown padding \"shortest\" (expected one of 'longest', 'max_length')",
        ),
        (
            "cdmae",
            {"dec_fill": "zero"},
            "dec_fill: unknown fill \"zero\" (expected one of 'bert', 'mask', 'keep')",
        ),
        (
            "simlm",
            {"generator_fill": "all"},
            "generator_fill: unknown fill \"all\" (expected one of 'bert', 'mask', 'keep')",
        ),
        (
            "bert",
            {},
            "method: unknown method \"bert\" (expected one of 'mlm', 'cdmae', 'simlm', 'enc-dec-mlm', "
            "'enc-dec-rtd', 'seed', 'condenser', 'autoencoder', 'contrastive')",
        ),
    ],
)
def test_bad_names_list_the_valid_ones(method, option, message):
    with pytest.raises(InvalidArgumentError) as err:
        _native.Collator(method, {**SETTINGS, **option}, **TOKENS)
    assert str(err.value) == message


def test_every_method_and_valid_name_is_accepted_from_a_mapping_or_a_model():
    from dense_pt.collate import METHODS

    for method in METHODS:
        for crop in ("head", "random"):
            for fill in ("bert", "mask", "keep", None):
                fills = {"enc_fill": fill, "dec_fill": fill, "generator_fill": fill}
                _native.Collator(method, {**SETTINGS, "crop": crop, **fills}, **TOKENS)
    model = CollatorSettings(**{k: v for k, v in SETTINGS.items()})
    assert _native.Collator("cdmae", model, **TOKENS).needs_importance
    assert not _native.Collator("simlm", model, **TOKENS).needs_importance


def test_a_needed_setting_is_refused_by_its_name():
    with pytest.raises(InvalidArgumentError, match=r"^p_dec is unset, and cdmae batches need it"):
        _native.Collator("cdmae", {**SETTINGS, "p_dec": None}, **TOKENS)
    with pytest.raises(InvalidArgumentError, match=r"^sigma is unset, and cdmae batches need it"):
        _native.Collator("cdmae", {**SETTINGS, "sigma": None}, **TOKENS)
    _native.Collator("mlm", {**SETTINGS, "p_dec": None, "sigma": None}, **TOKENS)  # mlm reads neither
    with pytest.raises(InvalidArgumentError, match=r"^the settings have no p_enc$"):
        _native.Collator("mlm", {k: v for k, v in SETTINGS.items() if k != "p_enc"}, **TOKENS)
    with pytest.raises(InvalidArgumentError, match=r"^p_enc: "):
        _native.Collator("mlm", {**SETTINGS, "p_enc": "a third"}, **TOKENS)
    with pytest.raises(InvalidArgumentError, match=r"p_enc <= p_dec"):
        _native.Collator("simlm", {**SETTINGS, "p_enc": 0.6}, **TOKENS)
