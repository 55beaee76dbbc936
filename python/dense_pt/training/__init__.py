"""The training engine shared by pre-training and every fine-tuning stage.

Use::

    from dense_pt.training import Trainer, TrainConfig, IndexedBatchSource

    source = IndexedBatchSource(num_rows, cfg.batch_size, make_batch, seed=cfg.seed, num_workers=2)
    trainer = Trainer(model, cfg, out_dir, source)   # model(batch) -> {"loss": ..., ...}
    result = trainer.train(resume=True)               # checkpoints in out_dir/checkpoints, log in out_dir/log.jsonl

``make_batch(rows, epoch)`` returns a dict of numpy arrays (or tensors); the trainer moves them to
the device. See ``trainer.py`` for the model contract (``accumulation_safe``) and ``data.py`` for
the determinism rules that make ``resume`` exact.
"""

from dense_pt.training.checkpoint import latest_checkpoint, list_checkpoints
from dense_pt.training.config import TrainConfig, merge_overrides, read_toml
from dense_pt.training.data import BatchSource, IndexedBatchSource, epoch_order, to_device
from dense_pt.training.distributed import DistInfo, init_distributed
from dense_pt.training.optim import build_optimizer, build_scheduler, lr_factor, param_groups
from dense_pt.training.trainer import Trainer, TrainResult, seed_everything

__all__ = [
    "BatchSource",
    "DistInfo",
    "IndexedBatchSource",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "build_optimizer",
    "build_scheduler",
    "epoch_order",
    "init_distributed",
    "latest_checkpoint",
    "list_checkpoints",
    "lr_factor",
    "merge_overrides",
    "param_groups",
    "read_toml",
    "seed_everything",
    "to_device",
]
