"""Human view of an n-gram table: statistics, top n-grams by PMI, and per-token AMI of a text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dense_pt.config.pmi import WINDOW
from dense_pt.pmi.table import NgramTable, check_int


def load_tokenizer_for(path: str | Path) -> Any:
    """A tokenizer from a tokenizer.json, a HF folder, or a corpus store directory."""
    from dense_pt.data.tokenizer import load_tokenizer

    path = Path(path)
    if path.is_dir() and (path / "manifest.json").exists():
        return load_tokenizer(path / "tokenizer.json")
    return load_tokenizer(path)


def token_ami(
    table: NgramTable, tokenizer: Any, text: str, window: int = WINDOW
) -> list[tuple[str, int, float]]:
    """(token string, id, AMI) for each content token of ``text`` (never padding: a tokenizer.json
    that pads to a fixed length, as all-MiniLM-L6-v2's does, is used with padding off)."""
    from dense_pt.data.tokenizer import without_padding_or_truncation

    enc = without_padding_or_truncation(tokenizer).encode(text, add_special_tokens=False)
    scores = table.ami(np.asarray(enc.ids, dtype=np.uint32), window=window)
    return [(tok, int(i), float(s)) for tok, i, s in zip(enc.tokens, enc.ids, scores, strict=True)]


def _colour(rank: float) -> str:
    # Low importance -> dim blue, high -> bold red (rank in [0, 1] within the text).
    palette = ["grey50", "blue", "cyan", "green", "yellow", "dark_orange", "bold red"]
    return palette[min(len(palette) - 1, int(rank * len(palette)))]


def render(
    table: NgramTable,
    tokenizer: str | Path | None = None,
    texts: list[str] | tuple[str, ...] = (),
    top: int = 10,
    top_min_count: int = 5,
    window: int = WINDOW,
    console: Any = None,
) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = console or Console()
    top = check_int("top (--top)", top, 0)
    top_min_count = check_int("top_min_count (--top-min-count)", top_min_count, 0)
    window = check_int("window (--window)", window, 2, table.max_n)
    tok = None
    if tokenizer is not None:
        from dense_pt.data.tokenizer import vocab_hash

        tok = load_tokenizer_for(tokenizer)
        table.check_vocab(vocab_hash(tok), f"the tokenizer {tokenizer}")
    s = table.stats()
    head = Table(title=f"n-gram table {s['path']}", show_header=True)
    head.add_column("order", justify="right")
    head.add_column("N_n (occurrences)", justify="right")
    head.add_column("stored n-grams", justify="right")
    for n in table.orders:
        head.add_row(str(n), f"{s['N'][n]:,}", f"{s['entries'][n]:,}")
    console.print(head)
    console.print(
        f"vocab size {s['vocab_size']:,}  vocab hash {s['vocab_hash'][:16]}…  min-count {s['min_count']}  "
        f"passages {s['num_passages']:,}  shard {s['shard'][0]}/{s['shard'][1]}  "
        f"file {s['file_bytes'] / 1e6:.1f} MB"
    )
    for n in table.orders[1:] if top > 0 else []:
        rows = table.top_pmi(n, top, top_min_count)
        t = Table(title=f"top {top} {n}-grams by PMI (count >= {top_min_count})")
        t.add_column("n-gram")
        t.add_column("count", justify="right")
        t.add_column("PMI", justify="right")
        for ids, c, p in rows:
            if tok is not None:
                pieces = " ".join(tok.id_to_token(i) or "?" for i in ids)
                shown = f"{tok.decode(ids)}  [dim]({pieces})[/]"
            else:
                shown = " ".join(map(str, ids))
            t.add_row(shown, f"{c:,}", f"{p:.2f}")
        console.print(t)
    if texts and tok is None:
        from dense_pt.errors import InvalidArgumentError

        raise InvalidArgumentError("--text needs --tokenizer (a tokenizer.json, HF folder or store)")
    for text in texts:
        scored = token_ami(table, tok, text, window)
        if not scored:
            continue
        values = np.array([a for _, _, a in scored])
        ranks = values.argsort().argsort() / max(len(values) - 1, 1)
        line = Text()
        for (token, _, a), r in zip(scored, ranks, strict=True):
            line.append(f"{token}", style=_colour(float(r)))
            line.append(f"({a:.1f}) ", style="dim")
        console.print(f"\n[bold]AMI per token (window {window}), grey = low … red = high[/]")
        console.print(line)
        order = sorted(scored, key=lambda x: -x[2])
        k = min(8, len(order))
        console.print(
            "most important: " + ", ".join(f"{t} {a:.2f}" for t, _, a in order[:k]),
        )
        console.print(
            "least important: " + ", ".join(f"{t} {a:.2f}" for t, _, a in order[::-1][:k]),
        )
