"""One artifact layer: every output says what it is, who wrote it, from what, and whether it is
complete, in one way (``manifest``), is claimed by one rule (``claim``), and checks its files with
one cached hash (``checksums``); outputs of older layouts stay readable (``legacy``)."""

from dense_pt.artifacts.checksums import (
    HASH,
    VERIFY_MODES,
    cache_root,
    checksum_entry,
    file_checksum,
    file_checksum_cached,
    remember_verified,
    verify_file,
)
from dense_pt.artifacts.claim import check, check_output_file, claim, claimed, finish, owner
from dense_pt.artifacts.manifest import (
    MANIFEST,
    Header,
    WrittenBy,
    body,
    header,
    inside,
    open,
    parse_header,
    read,
    write,
)

__all__ = [
    "HASH",
    "MANIFEST",
    "VERIFY_MODES",
    "Header",
    "WrittenBy",
    "body",
    "cache_root",
    "check",
    "check_output_file",
    "checksum_entry",
    "claim",
    "claimed",
    "file_checksum",
    "file_checksum_cached",
    "finish",
    "header",
    "inside",
    "open",
    "owner",
    "parse_header",
    "read",
    "remember_verified",
    "verify_file",
    "write",
]
