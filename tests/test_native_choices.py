"""Option names given to the native collator are parsed by the core's `FromStr`: a bad name is an
InvalidArgumentError naming the option and listing the valid names."""

from __future__ import annotations

import pytest

from dense_pt import _native
from dense_pt.errors import InvalidArgumentError

BASE = dict(
    max_length=8, cls_id=1, sep_id=2, pad_id=0, mask_id=3, vocab_size=20, seed=0, special_ids=[0, 1, 2, 3]
)


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ({"crop": "tail"}, "crop: unknown crop \"tail\" (expected one of 'head', 'random')"),
        (
            {"enc_labels": "all"},
            "enc_labels: unknown labels rule \"all\" (expected one of 'none', 'masked', 'content')",
        ),
        (
            {"decoder": "all-mask"},
            "decoder: unknown decoder view \"all-mask\" (expected one of 'none', 'independent', 'nested', 'clean', 'all_mask')",
        ),
        (
            {"enc_mask": ("topk", 0.3, 0.0, False)},
            "enc_mask: unknown masking \"topk\" (expected one of 'random', 'importance')",
        ),
    ],
)
def test_bad_names_list_the_valid_ones(option, message):
    with pytest.raises(InvalidArgumentError) as err:
        _native.Collator(**BASE, **option)
    assert str(err.value) == message


def test_every_valid_name_is_accepted():
    for crop in ("head", "random"):
        _native.Collator(**BASE, crop=crop)
    for labels in ("none", "masked", "content"):
        _native.Collator(**BASE, enc_labels=labels, dec_labels=labels)
    spec = ("importance", 0.3, 1.0, False)
    for decoder in ("none", "nested", "clean", "all_mask"):
        _native.Collator(**BASE, decoder=decoder, enc_mask=spec, p_dec=0.5)
    _native.Collator(**BASE, decoder="independent", dec_mask=("random", 0.5, 0.0, True))
