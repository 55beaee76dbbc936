"""`dense-pt encode`: embeddings of a corpus store (or a queries file) as fp16 ``.npy`` shards.

Output folder::

    manifest.json        model + its hash, source + its hash, pooling, normalize, max_length,
                         dtype, dim, shard_size, and the shards finished so far
    ids-00000.txt        the ids of shard 0, one a line, in corpus order
    emb-00000.npy        float16 [rows, dim], memory-mappable (np.load(..., mmap_mode="r"))

Each shard covers a contiguous row range of the source; inside a shard, rows are batched by
token length (less padding) and written back in corpus order. Shards are written atomically and
the manifest is updated after each, so a killed run, re-started with the same arguments, encodes
only the missing shards. Arguments that would change the embeddings must match the manifest.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dense_pt import artifacts, logs
from dense_pt.artifacts.checksums import file_digest
from dense_pt.artifacts.legacy import translate
from dense_pt.artifacts.manifest import inside
from dense_pt.config.retrieval import EncodeSettings
from dense_pt.errors import FormatError, InvalidArgumentError, MismatchError, not_found
from dense_pt.fsutil import atomic_file, write_json_atomic
from dense_pt.progress import Progress
from dense_pt.retrieval.encoder import (
    check_vocab,
    detect_spec,
    load_backbone,
    pad_batch,
    pool,
    position_limit,
)

MANIFEST = artifacts.MANIFEST
KIND = "embeddings"
FORMAT_VERSION = 1  # of the manifest (one written before versions had none: version 1)
DTYPES = {"float16": np.float16, "float32": np.float32}


def model_hash(model_dir: str | Path) -> str:
    """sha256 over the config and weight files of a model folder (identifies the checkpoint)."""
    h = hashlib.sha256()
    root = Path(model_dir)
    for name in sorted(p.name for p in root.iterdir() if p.is_file()):
        if name == "config.json" or name.endswith((".safetensors", ".bin")):
            h.update(name.encode())
            h.update(file_digest(root / name, "sha256").encode())
    return h.hexdigest()


@dataclass
class Embeddings:
    """The shards of an encode output, opened lazily (memory-mapped)."""

    path: Path
    manifest: dict[str, Any]

    @classmethod
    def open(cls, path: str | Path, kind: str | None = None, role: str = "") -> Embeddings:
        """Open a finished ``dense-pt encode`` folder; with ``kind`` ("queries" / "passages") it
        must hold that kind (``role`` names the argument in the message)."""
        path = Path(path)
        mpath = path / MANIFEST
        if not path.exists():
            raise not_found(path, "no such embeddings folder")
        if not mpath.exists():
            raise FormatError(
                "not an embeddings folder (no manifest.json; make one with `dense-pt encode`)", path
            )
        manifest = artifacts.read(path)
        if manifest is None:
            _raw_json(mpath)  # names invalid JSON
            raise FormatError("not an embeddings folder (its manifest.json is not dense-pt's)", path)
        if manifest["kind"] == "corpus store":
            raise FormatError(
                "this is a corpus store, not embeddings: encode it first with `dense-pt encode MODEL STORE`",
                path,
            )
        if manifest["kind"] != KIND or "shards" not in manifest:
            raise FormatError(f"not an embeddings folder (its manifest.json is a {manifest['kind']}'s)", path)
        found = manifest["settings"].get("kind")
        if kind is not None and found is not None and found != kind:
            raise MismatchError(
                f"{path}: holds {found} embeddings, but {role or 'this argument'} needs {kind}"
                + (" (are the queries and passages swapped?)" if role else ""),
            )
        check_manifest(path, manifest, mpath)
        if not manifest.get("complete"):
            raise FormatError("encoding is incomplete: re-run `dense-pt encode` to finish it", path)
        return cls(path, manifest)

    @property
    def num_shards(self) -> int:
        return len(self.manifest["shards"])

    @property
    def dim(self) -> int:
        return int(self.manifest["dim"])

    @property
    def normalized(self) -> bool:
        return bool(self.manifest["normalize"])

    def shard(self, i: int) -> tuple[list[str], np.ndarray]:
        info = self.manifest["shards"][i]
        mpath = self.path / MANIFEST
        ids = inside(self.path, info["ids"], mpath).read_text(encoding="utf-8").split("\n")[:-1]
        emb_path = inside(self.path, info["file"], mpath)
        emb = np.load(emb_path, mmap_mode="r")
        if emb.shape != (len(ids), self.dim):
            raise FormatError(f"shape {emb.shape} does not match {len(ids)} ids", emb_path)
        return ids, emb

    def ids(self) -> list[str]:
        return [pid for i in range(self.num_shards) for pid in self.shard(i)[0]]

    def load_all(self) -> tuple[list[str], np.ndarray]:
        parts = [self.shard(i) for i in range(self.num_shards)]
        ids = [p for ids, _ in parts for p in ids]
        emb = np.concatenate([np.asarray(e) for _, e in parts]) if parts else np.zeros((0, self.dim))
        return ids, emb


def check_manifest(folder: Path, manifest: dict[str, Any], mpath: Path) -> None:
    """Refuse a manifest of another format version, or one whose shards are not files inside
    ``folder`` (``artifacts.inside``): what a search reads, and what a resumed encode takes as done."""
    version = manifest.get("format", manifest.get("format_version", FORMAT_VERSION))
    if version != FORMAT_VERSION:
        raise FormatError(
            f"embeddings format version {version!r} is not supported (this dense-pt reads version "
            f"{FORMAT_VERSION}); encode again with this version",
            mpath,
        )
    shards = manifest.get("shards")
    if not isinstance(shards, list) or not all(isinstance(s, dict) for s in shards):
        raise FormatError("'shards' must be a list of objects", mpath)
    for shard in shards:
        inside(folder, shard.get("file"), mpath)
        inside(folder, shard.get("ids"), mpath)


def default_max_length(model_dir: str | Path, kind: str) -> int:
    """The length to encode ``kind`` ("queries" or "passages") with: the one the retriever was trained
    with (its ``retriever.json``, written by ``dense-pt train retriever / distill``), else the
    folder's sentence-transformers length of that side (``query_length`` / ``document_length``,
    sentence-transformers >= 6), else its ``max_seq_length``, else SimLM's (32 / 144, Table 13)."""
    from dense_pt.config.defaults import finetune as FT
    from dense_pt.retrieval.encoder import RETRIEVER_LENGTHS

    root = Path(model_dir)
    trained = root / RETRIEVER_LENGTHS
    if trained.exists():
        lengths = json.loads(trained.read_text())
        return int(lengths["query_max_length" if kind == "queries" else "passage_max_length"])
    st_config = root / "sentence_bert_config.json"
    if st_config.exists():
        st = json.loads(st_config.read_text())
        value = st.get("query_length" if kind == "queries" else "document_length") or st.get("max_seq_length")
        tok_config = root / "tokenizer_config.json"
        if value is None and tok_config.exists():  # sentence-transformers >= 6 keeps it here
            value = json.loads(tok_config.read_text()).get("model_max_length")
        if isinstance(value, int) and 3 <= value < 10**12:  # HF writes int(1e30) for "no limit"
            return value
    return FT.QUERY_MAX_LENGTH if kind == "queries" else FT.PASSAGE_MAX_LENGTH


def check_model_folder(model_dir: Path) -> dict[str, Any]:
    """The model's config.json, after checking that ``model_dir`` is a model folder at all (a
    clear error instead of a tokenizer traceback deep inside transformers)."""
    if not model_dir.exists():
        raise not_found(model_dir, "no such model folder")
    if not model_dir.is_dir():
        raise FormatError(
            "expected a model folder (config.json, weights, tokenizer.json), found a file", model_dir
        )
    config = model_dir / "config.json"
    if not config.is_file():
        raise FormatError(
            "not a model folder (no config.json); give a Hugging Face model folder with config.json, "
            "the weights and tokenizer.json",
            model_dir,
        )
    if not any((model_dir / n).is_file() for n in ("tokenizer.json", "vocab.txt", "tokenizer_config.json")):
        raise FormatError("the model folder has no tokenizer (tokenizer.json)", model_dir)
    try:
        return json.loads(config.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FormatError(f"invalid JSON ({exc})", config) from None


def check_queries_file(source: Path) -> None:
    """Refuse a BEIR corpus.jsonl given as queries: its titles would be dropped and every passage
    encoded as a query."""
    from dense_pt.data.lines import first_line

    line = first_line(source)
    try:
        obj = json.loads(line) if line else None
    except json.JSONDecodeError:
        return  # tsv queries, or a broken file the reader reports properly
    if isinstance(obj, dict) and "title" in obj:
        raise FormatError(
            "this looks like a corpus, not queries (its records have a 'title'); to encode passages, "
            "build a store (`dense-pt corpus build`) and give that folder",
            source,
            line=1,
        )


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _length_batches(lengths: np.ndarray, batch_size: int) -> list[np.ndarray]:
    order = np.argsort(-lengths, kind="stable")  # longest first: a memory error shows up at once
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def _encode_rows(
    model: Any,
    seqs: Sequence[np.ndarray],
    specials: tuple[int, int, int],
    max_length: int,
    batch_size: int,
    pooling: str,
    normalize: bool,
    device: str,
    out_dtype: Any,
    on_batch: Callable[[int], None] | None = None,
    unpad: bool = False,
) -> np.ndarray:
    import torch

    from dense_pt.models.unpad import encode_tokens

    cls, sep, pad = specials
    lengths = np.array([min(len(s), max_length - 2) for s in seqs], dtype=np.int64)
    dim = int(model.config.hidden_size)
    out = np.zeros((len(seqs), dim), dtype=out_dtype)
    autocast = device.startswith("cuda")
    with torch.inference_mode():
        for idx in _length_batches(lengths, batch_size):
            ids, mask = pad_batch([seqs[i] for i in idx], cls, sep, pad, max_length)
            ids, mask = ids.to(device), mask.to(device)
            with torch.autocast("cuda", dtype=torch.float16, enabled=autocast):
                hidden = encode_tokens(model, ids, mask, unpad=unpad).last_hidden_state
                emb = pool(hidden.float(), mask, pooling, normalize)
            out[idx] = emb.float().cpu().numpy().astype(out_dtype)
            if on_batch:
                on_batch(len(idx))
    return out


def _tokenize_queries(tokenizer: Any, texts: list[str]) -> list[np.ndarray]:
    enc = tokenizer(texts, add_special_tokens=False, truncation=False)["input_ids"]
    return [np.asarray(e, dtype=np.uint32) for e in enc]


@dataclass
class _Source:
    """What ``encode`` reads: the row ids, a function giving rows ``a:b`` as token ids, a hash."""

    ids: list[str]
    rows: Callable[[int, int], list[np.ndarray]]
    hash: str
    kind: str  # "passages" | "queries"


def _open_source(source: Path, model_dir: Path, tokenizer: Any) -> _Source:
    """A corpus store folder (its token ids, checked against the model's vocabulary) or a queries
    file (tokenized here)."""
    from dense_pt.data.readers import load_queries
    from dense_pt.data.store import CorpusStore

    if source.is_dir():
        store = CorpusStore.open(source)
        check_vocab(model_dir, store.vocab_hash)
        values, offsets = store.ragged()
        source_hash = hashlib.sha256(
            (store.vocab_hash + str(len(store)) + file_digest(store.path / "tokens.arrow", "sha256")).encode()
        ).hexdigest()

        def rows(a: int, b: int) -> list[np.ndarray]:
            return [values[offsets[i] : offsets[i + 1]] for i in range(a, b)]

        return _Source(store.ids.to_pylist(), rows, source_hash, "passages")
    queries = load_queries(source)
    texts = [queries[q] for q in queries]
    return _Source(
        list(queries),
        lambda a, b: _tokenize_queries(tokenizer, texts[a:b]),
        file_digest(source, "sha256"),
        "queries",
    )


def _part_manifest(rank: int) -> str:
    return f"manifest.part-{rank:05d}.json"


def _raw_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FormatError(f"invalid JSON ({exc})", path) from None


def _read_manifest(out: Path, name: str) -> dict[str, Any] | None:
    """The embeddings manifest ``name`` in ``out`` (any layout), None when there is none or only
    the header ``claim`` wrote (nothing encoded yet)."""
    mpath = out / name
    if not mpath.exists():
        return None
    data = _raw_json(mpath)
    manifest = data if artifacts.manifest.is_header(data) else translate(data, out)
    if manifest is None:
        raise FormatError("not an embeddings manifest", mpath)
    if manifest["kind"] != KIND:
        raise MismatchError(
            f"{out} holds a dense-pt {manifest['kind']}, not embeddings; use a new --out folder"
        )
    return manifest if "shards" in manifest else None


def _start_or_resume(out: Path, settings: dict[str, Any], name: str = MANIFEST) -> dict[str, Any]:
    """The folder's manifest (an interrupted run continues it), or a new one; other settings than
    the folder's are refused."""
    mpath = out / name
    manifest = _read_manifest(out, name)
    if manifest is None:
        head = artifacts.header(
            KIND, "encode", format=FORMAT_VERSION, key=settings["source_hash"], settings=settings
        )
        return {**head, "shards": []}
    check_manifest(out, manifest, mpath)
    changed = [k for k, v in settings.items() if manifest.get("settings", {}).get(k) != v]
    if changed:
        raise MismatchError(
            f"{out} holds embeddings made with other settings ({', '.join(changed)}); use a new --out folder"
        )
    return manifest


def _write_shard(out: Path, manifest: dict[str, Any], s: int, ids: list[str], rows: tuple[int, int],
                 emb: np.ndarray, n_shards: int, name: str = MANIFEST) -> None:  # fmt: skip
    """Shard ``s`` (ids file + embeddings), then the manifest (``name``) that lists it."""
    ids_name, emb_name = f"ids-{s:05d}.txt", f"emb-{s:05d}.npy"
    with atomic_file(out / ids_name, "w", encoding="utf-8") as f:
        f.write("".join(f"{pid}\n" for pid in ids))
    with atomic_file(out / emb_name, "wb") as f:
        np.save(f, emb)
    manifest["shards"].append({"index": s, "file": emb_name, "ids": ids_name, "rows": list(rows)})
    manifest["shards"].sort(key=lambda x: x["index"])
    manifest["complete"] = len(manifest["shards"]) == n_shards
    write_json_atomic(out / name, manifest)


def _checked_inputs(model_dir: Path, source: Path, max_length: int | None) -> int:
    """Refuse bad arguments before anything loads; the length to encode with (the model's trained
    length by default, clamped with a warning to its positions; a longer explicit one is refused)."""
    limit = position_limit(check_model_folder(model_dir))
    if not source.exists():
        raise not_found(source, "no such corpus store or queries file")
    if not source.is_dir():
        check_queries_file(source)
    if max_length is None:
        max_length = default_max_length(model_dir, "passages" if source.is_dir() else "queries")
        if limit is not None and max_length > limit:
            logs.log.warning(
                f"encode: the default length {max_length} is longer than {model_dir}'s "
                f"{limit} positions; encoding with max length {limit}"
            )
            max_length = limit
    elif limit is not None and max_length > limit:
        raise InvalidArgumentError(
            f"max_length (--max-length) {max_length} is longer than the model's {limit} positions "
            f"(max_position_embeddings in {model_dir / 'config.json'}); use at most {limit}"
        )
    return max_length


def encode(
    model_dir: str | Path,
    source: str | Path,
    out: str | Path,
    settings: EncodeSettings | None = None,
    *,
    progress: bool = True,
    part: tuple[int, int] = (0, 1),
) -> Path:
    """Encode a corpus store folder or a queries file (BEIR jsonl / ``qid<TAB>text``) into ``out``
    with ``settings`` (default: ``EncodeSettings()``; e.g. ``EncodeSettings(max_length=64,
    device="cpu")``), recorded in the manifest (``"encode_settings"``).

    ``max_length`` (tokens, [CLS] and [SEP] included) defaults to the lengths the model was trained
    with (``default_max_length``). ``part=(rank, world)``: this process encodes shards ``rank,
    rank + world, ...`` only and lists them in its own ``manifest.part-RANK.json``; once every
    process has finished, ``merge_parts(out)`` writes the folder's manifest. A shard's embeddings do
    not depend on which process computed it, so the folder equals a one-process encoding.
    An interrupted encoding continues where it stopped when called again with the same settings.
    """
    from dense_pt.models.unpad import resolve_unpad
    from dense_pt.retrieval.encoder import load_hf_tokenizer

    s = EncodeSettings() if settings is None else settings
    model_dir, source, out = Path(model_dir), Path(source), Path(out)
    max_length = _checked_inputs(model_dir, source, s.max_length)
    dtype, shard_size, batch_size = s.dtype, s.shard_size, s.batch_size
    spec = detect_spec(model_dir, s.pooling, s.normalize)
    device = s.device or _default_device()
    tokenizer = load_hf_tokenizer(model_dir)
    src = _open_source(source, model_dir, tokenizer)
    specials = (tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id)
    if None in specials:
        raise FormatError("the model's tokenizer lacks a [CLS], [SEP] or [PAD] token", model_dir)
    ident = {"model": str(model_dir.resolve()), "model_hash": model_hash(model_dir),
                "source": str(source.resolve()), "source_hash": src.hash, "kind": src.kind,
                "pooling": spec.pooling, "normalize": spec.normalize, "max_length": max_length, "dtype": dtype,
                "shard_size": shard_size, "num_rows": len(src.ids)}  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    rank, world = part
    name = MANIFEST if world == 1 else _part_manifest(rank)
    manifest = _start_or_resume(out, ident, name)
    model = load_backbone(model_dir, device)
    packed = resolve_unpad(s.unpad, [model], device)
    manifest["dim"] = int(model.config.hidden_size)
    manifest["encode_settings"] = s.model_dump()
    for k in ("pooling", "normalize", "num_rows"):
        manifest[k] = ident[k]
    done = {x["index"] for x in manifest["shards"]}
    n, n_shards = len(src.ids), max(1, -(-len(src.ids) // shard_size))
    todo = [i for i in range(n_shards) if i % world == rank and i not in done]
    total = sum(min(shard_size, n - i * shard_size) for i in todo)
    t0 = time.perf_counter()
    bar = Progress("encode", src.kind, enabled=None if progress else False)
    with bar:  # a failure or Ctrl-C ends the display without a 'done' line
        bar.update("encoding", 0, total)
        for i in todo:
            a, b = i * shard_size, min((i + 1) * shard_size, n)
            emb = _encode_rows(
                model, src.rows(a, b), specials, max_length, batch_size, spec.pooling, spec.normalize,
                device, DTYPES[dtype], bar.advance, packed,
            )  # fmt: skip
            _write_shard(out, manifest, i, src.ids[a:b], (a, b), emb, n_shards, name)
    mine = {i for i in range(n_shards) if i % world == rank}
    manifest["complete"] = (
        {x["index"] for x in manifest["shards"]} == mine
        if world > 1
        else (len(manifest["shards"]) == n_shards)
    )
    manifest["elapsed_s"] = round(time.perf_counter() - t0, 3)
    write_json_atomic(out / name, manifest)
    return out


def merge_parts(out: str | Path) -> Path:
    """The manifest of a folder encoded by several processes (``encode(..., part=...)``): every part
    made with the same settings, every shard present, listed in one ``manifest.json`` as a
    one-process run writes it; the part manifests are removed."""
    out = Path(out)
    parts = sorted(out.glob("manifest.part-*.json"))
    if not parts:
        raise FormatError("no part manifests to merge (encode(..., part=(rank, world)) writes them)", out)
    loaded = [_raw_json(p) for p in parts]
    for p, m in zip(parts, loaded, strict=True):
        check_manifest(out, m, p)
    first = loaded[0]
    if any(m["settings"] != first["settings"] for m in loaded):
        raise MismatchError(f"{out}: its parts were encoded with other settings")
    shards = sorted({s["index"]: s for m in loaded for s in m["shards"]}.values(), key=lambda x: x["index"])
    n_shards = max(1, -(-int(first["settings"]["num_rows"]) // int(first["settings"]["shard_size"])))
    if [s["index"] for s in shards] != list(range(n_shards)):
        raise FormatError(f"only {len(shards)} of {n_shards} shards are encoded: a part is unfinished", out)
    manifest = {k: v for k, v in first.items() if k not in ("shards", "complete", "elapsed_s")}
    manifest.update(shards=shards, complete=True, elapsed_s=max(m.get("elapsed_s", 0.0) for m in loaded))
    write_json_atomic(out / MANIFEST, manifest)
    for p in parts:
        p.unlink()
    return out
