"""``mlm``: BERT's masked language modelling on the encoder alone (SimLM's baseline, 30% masking)."""

from __future__ import annotations

from dense_pt.models.heads import mlm_loss
from dense_pt.objectives.base import Objective


class MLM(Objective):
    method = "mlm"

    def forward(self, batch):
        seq = self.encode(batch["input_ids"], batch["attention_mask"]).last_hidden_state
        loss = mlm_loss(self.lm_head, seq, batch["labels"])
        return {"loss": loss, "loss_enc": loss.detach()}
