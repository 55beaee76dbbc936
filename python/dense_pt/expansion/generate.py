"""Generation backends: a local Hugging Face model, or an OpenAI-compatible HTTP endpoint.

Both take rendered prompts plus one seed per prompt and return the raw text of one completion per
prompt. Parsing happens elsewhere (:mod:`dense_pt.expansion.parse`).

- :class:`HFGenerator` loads a local causal (decoder-only) or seq2seq model folder, or a ``.gguf``
  file through transformers' ``gguf_file=`` (needs the ``gguf`` and ``accelerate`` packages); it
  never downloads. Prompts are generated in batches with left padding (causal); a chat model's
  prompt is wrapped in its chat template (``chat="auto"``: when the tokenizer has one). Sampling in
  a batch draws from one torch RNG stream seeded from the batch's per-passage seeds, so a run is
  reproducible for the same seed, batch size and set of passages to generate.
- :class:`EndpointGenerator` sends one request per prompt (``/v1/completions``, or
  ``/v1/chat/completions`` with ``chat=True``) with the passage's own ``seed``, several in flight at
  once (servers such as vLLM batch concurrent requests), using only the standard library. Network
  errors, timeouts, HTTP 429 and 5xx are retried with exponential backoff; other HTTP errors fail at
  once with the server's message.
"""

from __future__ import annotations

import errno
import hashlib
import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from dense_pt._extras import require
from dense_pt.config.expand import (
    MAX_NEW_TOKENS,
    RETRIES,
    TEMPERATURE,
    TIMEOUT,
    TOP_K,
    TOP_P,
    SamplingSettings,
)
from dense_pt.errors import DensePtIOError, FormatError, InvalidArgumentError, io_error


@dataclass(frozen=True)
class SamplingParams:
    """Nucleus sampling as in the paper: top_p 0.95, top_k 50, temperature 0.7."""

    temperature: float = TEMPERATURE
    top_p: float = TOP_P
    top_k: int = TOP_K
    max_new_tokens: int = MAX_NEW_TOKENS

    def __post_init__(self) -> None:
        SamplingSettings(**asdict(self))  # the one check, as dense-pt expand's

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class QueryGenerator(Protocol):
    """What :func:`dense_pt.expansion.expand` needs from a backend."""

    name: str
    backend: str
    chat: bool

    def generate(self, prompts: list[str], seeds: list[int], sampling: SamplingParams) -> list[str]: ...


def _combined_seed(seeds: list[int]) -> int:
    h = hashlib.blake2b(",".join(map(str, seeds)).encode(), digest_size=8)
    return int.from_bytes(h.digest(), "little") & 0x7FFFFFFFFFFFFFFF


def resolve_model_path(model: str | Path) -> tuple[Path, str | None]:
    """(folder, gguf file name or None) of a local model; a folder holding only one .gguf works too."""
    path = Path(model)
    if path.is_file():
        if path.suffix != ".gguf":
            raise InvalidArgumentError(
                f"--model {path}: a file must be a .gguf; otherwise give a model folder"
            )
        return path.parent, path.name
    if path.is_dir():
        if (path / "config.json").is_file():
            return path, None
        ggufs = sorted(p.name for p in path.glob("*.gguf"))
        if len(ggufs) == 1:
            return path, ggufs[0]
        raise InvalidArgumentError(
            f"--model {path}: no config.json and "
            + (f"{len(ggufs)} .gguf files (name one)" if ggufs else "no .gguf file")
        )
    raise io_error(
        errno.ENOENT,
        f"--model {path}: no such local model folder or .gguf file (dense-pt never downloads weights)",
        path,
    )


class HFGenerator:
    backend = "hf"

    def __init__(
        self,
        model: str | Path,
        device: str | None = None,
        dtype: str = "auto",
        chat: str | bool = "auto",
        max_input_tokens: int = 1024,
    ):
        torch = require("torch")
        transformers = require("transformers")
        folder, gguf = resolve_model_path(model)
        if gguf is not None:
            require("gguf")
        kwargs: dict[str, Any] = {"local_files_only": True}
        if gguf is not None:
            kwargs["gguf_file"] = gguf
        self.name = str(Path(folder) / gguf) if gguf else str(folder)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        config = transformers.AutoConfig.from_pretrained(folder, **kwargs)
        self.seq2seq = bool(getattr(config, "is_encoder_decoder", False))
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(folder, **kwargs)
        if self.tokenizer.pad_token is None:
            if self.tokenizer.eos_token is None:
                raise InvalidArgumentError(
                    f"--model {self.name}: tokenizer has neither a pad nor an eos token"
                )
            self.tokenizer.pad_token = self.tokenizer.eos_token
        if not self.seq2seq:
            self.tokenizer.padding_side = "left"
        torch_dtype = _torch_dtype(torch, dtype, self.device)
        cls = transformers.AutoModelForSeq2SeqLM if self.seq2seq else transformers.AutoModelForCausalLM
        try:
            self.model = cls.from_pretrained(folder, dtype=torch_dtype, **kwargs)
        except ImportError as exc:  # gguf loading needs accelerate
            raise InvalidArgumentError(f"--model {self.name}: {exc}") from exc
        self.model.to(self.device).eval()
        has_template = bool(getattr(self.tokenizer, "chat_template", None))
        if chat == "auto":
            self.chat = has_template and not self.seq2seq
        else:
            self.chat = bool(chat)
            if self.chat and not has_template:
                raise InvalidArgumentError(f"--chat: the tokenizer of {self.name} has no chat template")
        self.max_input_tokens = max_input_tokens
        # a decoder's positions hold the prompt and the new tokens together: past them an absolute
        # position embedding indexes out of range (GPT-2, BERT-style LMs), a rotary one degrades
        self.window = None if self.seq2seq else context_window(config)
        self._torch = torch

    def input_limit(self, max_new_tokens: int) -> int:
        """The prompt tokens kept (truncated on the tokenizer's side) so that prompt and new tokens
        fit the model's positions; one line naming ``--max-new-tokens`` when nothing would."""
        if self.window is None:
            return self.max_input_tokens
        room = self.window - max_new_tokens
        if room < 1:
            raise InvalidArgumentError(
                f"--max-new-tokens {max_new_tokens}: {self.name} has {self.window} positions, "
                f"so at most {self.window - 1} new tokens fit after a prompt"
            )
        return min(self.max_input_tokens, room)

    def format(self, prompt: str) -> str:
        if not self.chat:
            return prompt
        return self.tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False
        )

    def generate(self, prompts: list[str], seeds: list[int], sampling: SamplingParams) -> list[str]:
        torch = self._torch
        texts = [self.format(p) for p in prompts]
        enc = self.tokenizer(
            texts,
            return_tensors="pt",
            padding=True,
            truncation=True,
            max_length=self.input_limit(sampling.max_new_tokens),
            add_special_tokens=not self.chat,
        ).to(self.device)
        torch.manual_seed(_combined_seed(seeds))
        with torch.inference_mode():
            out = self.model.generate(  # token_type_ids (BERT-style tokenizers) mean nothing to generate
                input_ids=enc["input_ids"],
                attention_mask=enc["attention_mask"],
                do_sample=True,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                top_k=sampling.top_k,  # 0 disables it (None would fall back to the model default)
                max_new_tokens=sampling.max_new_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        if not self.seq2seq:
            out = out[:, enc["input_ids"].shape[1] :]
        return self.tokenizer.batch_decode(out, skip_special_tokens=True)


def context_window(config: Any) -> int | None:
    """How many positions a decoder-only model has (``max_position_embeddings``, GPT-2's
    ``n_positions``), or None when its config does not say."""
    for name in ("max_position_embeddings", "n_positions"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _torch_dtype(torch: Any, dtype: str, device: str) -> Any:
    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    try:
        return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    except KeyError:
        raise InvalidArgumentError(
            f"--dtype must be auto, float32, bfloat16 or float16, got {dtype!r}"
        ) from None


def endpoint_url(url: str, chat: bool) -> str:
    """``http://host:8000/v1`` -> ``.../v1/completions`` (or ``/chat/completions``); full paths stay."""
    url = url.rstrip("/")
    if url.endswith("/completions"):
        return url
    return url + ("/chat/completions" if chat else "/completions")


class EndpointGenerator:
    backend = "endpoint"
    RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})

    def __init__(
        self,
        url: str,
        model: str,
        chat: bool = False,
        timeout: float = TIMEOUT,
        retries: int = RETRIES,
        backoff: float = 1.0,
        concurrency: int = 8,
        api_key: str | None = None,
    ):
        if not url.startswith(("http://", "https://")):
            raise InvalidArgumentError(f"--endpoint must be an http(s) URL, got {url!r}")
        self.url = endpoint_url(url, chat)
        self.chat = self.url.endswith("/chat/completions")
        self.name = model
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self.concurrency = max(1, concurrency)
        self.api_key = api_key
        self.requests = 0  # HTTP requests sent, retries included

    def _body(self, prompt: str, seed: int, s: SamplingParams) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.name,
            "max_tokens": s.max_new_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "seed": seed,
            "n": 1,
        }
        if s.top_k:
            body["top_k"] = s.top_k  # vLLM / llama.cpp / TGI extension; 0 leaves it out
        if self.chat:
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        return body

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last: str = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            self.requests += 1
            req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    payload = resp.read()
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:500].decode("utf-8", "replace")
                last = f"HTTP {exc.code}: {detail}"
                if exc.code in self.RETRY_STATUS:
                    continue
                raise DensePtIOError(f"{self.url}: {last}") from exc
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                last = str(getattr(exc, "reason", exc))
                continue
            try:
                return json.loads(payload)
            except json.JSONDecodeError as exc:
                raise FormatError(f"response is not JSON ({exc.msg}): {payload[:200]!r}", self.url) from exc
        raise DensePtIOError(f"{self.url}: giving up after {self.retries + 1} attempts; last error: {last}")

    def _one(self, prompt: str, seed: int, s: SamplingParams) -> str:
        resp = self._post(self._body(prompt, seed, s))
        try:
            choice = resp["choices"][0]
            text = choice["message"]["content"] if self.chat else choice["text"]
        except (KeyError, IndexError, TypeError) as exc:
            raise FormatError(
                f"unexpected response shape (no choices[0].{'message.content' if self.chat else 'text'}): "
                f"{json.dumps(resp)[:200]}",
                self.url,
            ) from exc
        if not isinstance(text, str):
            raise FormatError("completion text is not a string", self.url)
        return text

    def generate(self, prompts: list[str], seeds: list[int], sampling: SamplingParams) -> list[str]:
        if len(prompts) == 1:
            return [self._one(prompts[0], seeds[0], sampling)]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(prompts))) as pool:
            return list(
                pool.map(lambda ps: self._one(ps[0], ps[1], sampling), zip(prompts, seeds, strict=True))
            )


def describe_generator(generator: QueryGenerator) -> dict[str, Any]:
    return {"model": generator.name, "backend": generator.backend, "chat": bool(generator.chat)}


def open_generator(
    model: str | Path,
    endpoint: str | None = None,
    chat: str | bool = "auto",
    device: str | None = None,
    dtype: str = "auto",
    timeout: float = TIMEOUT,
    retries: int = RETRIES,
    concurrency: int = 8,
    api_key: str | None = None,
) -> QueryGenerator:
    if endpoint:
        return EndpointGenerator(
            endpoint,
            str(model),
            chat=chat is True,
            timeout=timeout,
            retries=retries,
            concurrency=concurrency,
            api_key=api_key,
        )
    return HFGenerator(model, device=device, dtype=dtype, chat=chat)


Generator = QueryGenerator  # the old name (pre-training's ELECTRA generator is ElectraGenerator)

__all__ = [
    "EndpointGenerator",
    "Generator",
    "HFGenerator",
    "QueryGenerator",
    "SamplingParams",
    "describe_generator",
    "endpoint_url",
    "open_generator",
    "resolve_model_path",
]
