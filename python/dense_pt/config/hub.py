"""``dense-pt hub export`` (``dense_pt.hub.export_hub``): a retriever folder made ready for the
Hugging Face Hub, and optionally uploaded there."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from dense_pt.config.base import Model

DEFAULT_LICENSE = "apache-2.0"  # dense-pt's own (the Hub's identifier); a base model's licence wins
# The Hub's repository ids: a namespace and a name of letters, digits, '-', '_' and '.'
REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")


class HubSettings(Model):
    """What goes into the card and where the folder is uploaded."""

    license: str | None = Field(
        None,
        description=f"The card's licence, a Hub identifier (default: the base model's, from its card, else {DEFAULT_LICENSE}).",
    )
    title: str | None = Field(
        None, description="The card's title (default: the name --push-to-hub gives, else OUT's)."
    )
    push_to_hub: str | None = Field(
        None,
        description="Upload the folder to this Hub repository (owner/name) with huggingface_hub.upload_folder.",
    )
    private: bool = Field(False, description="--push-to-hub: create the repository private.")

    @field_validator("push_to_hub")
    @classmethod
    def repo_id(cls, v: str | None) -> str | None:
        if v is not None and not REPO_ID.match(v):
            raise ValueError(f"must be a Hub repository id, owner/name, got {v!r}")
        return v

    @field_validator("license")
    @classmethod
    def license_id(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[a-z0-9][a-z0-9.+-]*", v):
            raise ValueError(
                f"must be a Hub licence identifier in lower case (apache-2.0, mit, ...), got {v!r}"
            )
        return v
