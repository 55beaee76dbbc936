"""The objective classes by method name, and ``build_objective`` (needs torch)."""

from __future__ import annotations

from collections.abc import Callable

from dense_pt.errors import InvalidArgumentError
from dense_pt.objectives.autoencoder import AutoEncoder
from dense_pt.objectives.base import Objective
from dense_pt.objectives.cdmae import CDMAE
from dense_pt.objectives.condenser import Condenser
from dense_pt.objectives.contrastive import Contrastive
from dense_pt.objectives.enc_dec_mlm import EncDecMLM
from dense_pt.objectives.enc_dec_rtd import EncDecRTD
from dense_pt.objectives.mlm import MLM
from dense_pt.objectives.options import MethodOptions, SpecialIds, check_method
from dense_pt.objectives.querygen import QueryGen
from dense_pt.objectives.seed import SEED
from dense_pt.objectives.simlm import SimLM

OBJECTIVES: dict[str, type[Objective]] = {
    "simlm": SimLM,
    "cdmae": CDMAE,
    "seed": SEED,
    "mlm": MLM,
    "enc-dec-mlm": EncDecMLM,
    "enc-dec-rtd": EncDecRTD,
    "condenser": Condenser,
    "autoencoder": AutoEncoder,
    "querygen": QueryGen,
    "contrastive": Contrastive,
}


def build_objective(method: str, encoder, special: SpecialIds, opts: MethodOptions) -> Objective:
    """Assemble the objective around ``encoder`` (options already resolved)."""
    cls = OBJECTIVES[check_method(method)]
    if cls.uses_generator:
        from dense_pt.models.generator import ElectraGenerator

        if opts.generator is None:  # resolve_options refuses this too; a direct caller gets one line
            raise InvalidArgumentError(f"{method} needs a generator: pass --generator PATH|HUB-NAME|joint")
        generator = ElectraGenerator.load(opts.generator, encoder.config, special.vocab_size)
        with_generator: Callable[..., Objective] = cls  # its __init__ takes the generator too
        return with_generator(encoder, special, opts, generator)
    return cls(encoder, special, opts)
