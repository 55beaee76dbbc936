"""The papers' numbers, each written once with its source: ``finetune`` (SimLM's Table 13, the
fine-tuning stages) and ``objectives`` (each pre-training method's profiles, per paper). Plain
data, no torch: the config models, the collator presets and the torch-side modules read them."""
