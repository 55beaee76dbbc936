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


def describe(
    table: NgramTable,
    tokenizer: str | Path | None = None,
    texts: list[str] | tuple[str, ...] = (),
    top: int = 10,
    top_min_count: int = 5,
    window: int = WINDOW,
) -> dict[str, Any]:
    """What ``render`` shows, as data: the table's statistics, ``top_pmi`` (order -> its ``top``
    n-grams by PMI among those seen >= ``top_min_count`` times: ids, count, PMI, and the decoded
    text and tokens with a tokenizer) and ``ami`` (per text of ``texts``: each token's AMI)."""
    top = check_int("top (--top)", top, 0)
    top_min_count = check_int("top_min_count (--top-min-count)", top_min_count, 0)
    window = check_int("window (--window)", window, 2, table.max_n)
    tok = None
    if tokenizer is not None:
        from dense_pt.data.tokenizer import vocab_hash

        tok = load_tokenizer_for(tokenizer)
        table.check_vocab(vocab_hash(tok), f"the tokenizer {tokenizer}")
    if texts and tok is None:
        from dense_pt.errors import InvalidArgumentError

        raise InvalidArgumentError("--text needs --tokenizer (a tokenizer.json, HF folder or store)")
    top_pmi: dict[str, list[dict[str, Any]]] = {}
    for n in table.orders[1:] if top > 0 else []:
        rows = top_pmi[str(n)] = []
        for ids, count, pmi in table.top_pmi(n, top, top_min_count):
            row: dict[str, Any] = {"ids": [int(i) for i in ids], "count": int(count), "pmi": float(pmi)}
            if tok is not None:
                row |= {"text": tok.decode(ids), "tokens": [tok.id_to_token(i) or "?" for i in ids]}
            rows.append(row)
    ami = [{"text": text, "window": window,
            "tokens": [{"token": t, "id": i, "ami": a} for t, i, a in token_ami(table, tok, text, window)]}
           for text in texts]  # fmt: skip
    return {**table.stats(), "top_min_count": top_min_count, "top_pmi": top_pmi, "ami": ami}


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

    console = console or Console()
    d = describe(table, tokenizer, texts, top, top_min_count, window)
    head = Table(title=f"n-gram table {d['path']}", show_header=True)
    head.add_column("order", justify="right")
    head.add_column("N_n (occurrences)", justify="right")
    head.add_column("stored n-grams", justify="right")
    for n in table.orders:
        head.add_row(str(n), f"{d['N'][n]:,}", f"{d['entries'][n]:,}")
    console.print(head)
    console.print(
        f"vocab size {d['vocab_size']:,}  vocab hash {d['vocab_hash'][:16]}…  min-count {d['min_count']}  "
        f"passages {d['num_passages']:,}  shard {d['shard'][0]}/{d['shard'][1]}  "
        f"file {d['file_bytes'] / 1e6:.1f} MB"
    )
    for n, rows in d["top_pmi"].items():
        t = Table(title=f"top {top} {n}-grams by PMI (count >= {d['top_min_count']})")
        t.add_column("n-gram")
        t.add_column("count", justify="right")
        t.add_column("PMI", justify="right")
        for row in rows:
            if "text" in row:
                shown = f"{row['text']}  [dim]({' '.join(row['tokens'])})[/]"
            else:
                shown = " ".join(map(str, row["ids"]))
            t.add_row(shown, f"{row['count']:,}", f"{row['pmi']:.2f}")
        console.print(t)
    for scored in d["ami"]:
        _render_ami(console, scored["tokens"], scored["window"])


def _render_ami(console: Any, scored: list[dict[str, Any]], window: int) -> None:
    """One text's tokens coloured by AMI rank, then its most and least important tokens."""
    from rich.text import Text

    if not scored:
        return
    values = np.array([s["ami"] for s in scored])
    ranks = values.argsort().argsort() / max(len(values) - 1, 1)
    line = Text()
    for s, r in zip(scored, ranks, strict=True):
        line.append(f"{s['token']}", style=_colour(float(r)))
        line.append(f"({s['ami']:.1f}) ", style="dim")
    console.print(f"\n[bold]AMI per token (window {window}), grey = low … red = high[/]")
    console.print(line)
    order = sorted(scored, key=lambda s: -s["ami"])
    k = min(8, len(order))
    console.print("most important: " + ", ".join(f"{s['token']} {s['ami']:.2f}" for s in order[:k]))
    console.print("least important: " + ", ".join(f"{s['token']} {s['ami']:.2f}" for s in order[::-1][:k]))
