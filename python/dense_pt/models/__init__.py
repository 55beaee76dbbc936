"""The model framework of pre-training: a deep encoder, a bottleneck, shallow decoders and heads."""

from dense_pt.models.decoders import LayerStack, band_keep, bidirectional_keep, with_bottleneck
from dense_pt.models.encoder import check_encoder_vocab, layer_mask, load_encoder, padding_keep
from dense_pt.models.generator import ElectraGenerator, Generator, joint_generator_config
from dense_pt.models.heads import MLMHead, RTDHead, mlm_loss

__all__ = [
    "ElectraGenerator",
    "Generator",
    "LayerStack",
    "MLMHead",
    "RTDHead",
    "band_keep",
    "bidirectional_keep",
    "check_encoder_vocab",
    "joint_generator_config",
    "layer_mask",
    "load_encoder",
    "mlm_loss",
    "padding_keep",
    "with_bottleneck",
]
