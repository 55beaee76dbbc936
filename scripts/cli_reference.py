"""Write docs/reference/cli.md, the command reference, from the command line itself.

Every listed command of `dense-pt` (hidden aliases left out) with its synopsis, its help, its
arguments and its options (in their help panels), each with its type, its default and its help, as
click holds them after typer built the commands: what `--help` prints, as one page of the site.
tests/test_cli_reference.py fails when the committed page differs from what this writes now, so a
changed option cannot leave the page behind: run `python scripts/cli_reference.py` and commit it.

    python scripts/cli_reference.py            # rewrite docs/reference/cli.md
    python scripts/cli_reference.py --check    # exit 1 if the page is stale
"""

from __future__ import annotations

import html
import re
import sys
from enum import Enum
from pathlib import Path
from typing import Any

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "cli.md"

HEADER = """# Command reference

Every `dense-pt` command with its arguments and options, generated from the command line itself by
`scripts/cli_reference.py` (a test fails when this page and the commands differ). The same text is
`dense-pt COMMAND --help`; [the command line](../cli.md) explains the habits every command shares.
A default in parentheses says where the value comes from; an option without one is unset unless
given. Settings given as options can come from a `--config` file or `--set key=VALUE` too.
"""


def _plain_help(value: str) -> str:
    """A help text as typer holds it, its rich-markup escapes undone, on one line."""
    return " ".join(value.replace("\\[", "[").split())


def _literal(value: str, specials: str = r"\\`*_\[\]|") -> str:
    """Text that Markdown shows as it is (``[CLS]`` not a link, ``<path>`` not a tag)."""
    return re.sub(f"([{specials}])", r"\\\1", html.escape(value, quote=False))


def _text(value: str) -> str:
    """A help text as one Markdown table cell (a pipe there would end the cell, even in code)."""
    return _literal(_plain_help(value))


def _prose(value: str) -> str:
    """A command's help as a Markdown paragraph: its `code` spans kept, the rest literal."""
    parts = re.split(r"(`[^`]*`)", _plain_help(value))
    return "".join(p if p.startswith("`") else _literal(p, r"\\*_\[\]") for p in parts)


def _plain(value: Any) -> str:
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, list | tuple):
        return ", ".join(_plain(v) for v in value)
    return str(value)


def _type(param: Any, ctx: Any) -> str:
    """The type column of ``--help`` (``<int>``, ``<simlm|infonce>``, ``KEY=VALUE``); a flag: "flag"."""
    if getattr(param, "is_flag", False):
        return "flag"
    if hasattr(param, "display_type_rich"):
        return param.display_type_rich(ctx=ctx) or ""
    return param.make_metavar(ctx=ctx) or ""  # typer before 0.2x (the lower bound): its own metavar


def _default(param: Any) -> str:
    if param.required:
        return "required"
    shown = getattr(param, "show_default", None)
    if isinstance(shown, str):
        return f"({shown})"
    default = param.default
    if callable(default) or default is None or shown is False:
        return ""
    if param.secondary_opts:  # --x/--no-x: the name that applies
        return param.opts[0] if default else param.secondary_opts[0]
    if getattr(param, "is_flag", False) or default in ((), []):
        return ""
    return _plain(default)


def _options_table(params: list[Any], ctx: Any) -> list[str]:
    rows = ["| option | type | default | help |", "|---|---|---|---|"]
    for p in params:
        names = ", ".join([*p.opts, *p.secondary_opts])
        rows.append(
            f"| {_text(names)} | {_text(_type(p, ctx))} | {_text(_default(p))} | {_text(p.help or '')} |"
        )
    return rows


def _section(path: list[str], cmd: Any, ctx: Any) -> list[str]:
    name = " ".join(["dense-pt", *path])
    out = [f"## {name}", ""]
    usage = " ".join(cmd.collect_usage_pieces(ctx))
    out += ["```", f"{name} {usage}", "```", ""]
    if cmd.help:
        out += [_prose(cmd.help), ""]
    args = [p for p in cmd.params if p.param_type_name == "argument"]
    if args:
        out += ["**Arguments**", "", "| argument | type | help |", "|---|---|---|"]
        for p in args:
            need = "" if p.required else " (optional)"
            out.append(
                f"| {_text(p.name.upper())}{need} | {_text(_type(p, ctx))} | {_text(getattr(p, 'help', '') or '')} |"
            )
        out.append("")
    panels: dict[str, list[Any]] = {}
    for p in cmd.params:
        if p.param_type_name == "option" and not p.hidden:
            panels.setdefault(getattr(p, "rich_help_panel", None) or "Options", []).append(p)
    for panel, params in panels.items():
        out += [f"**{panel}**", "", *_options_table(params, ctx), ""]
    return out


def render() -> str:
    """The page, from the commands as they are now."""
    import click
    import typer.main

    from dense_pt.cli import app

    root = typer.main.get_command(app)
    lines = [HEADER]

    def walk(cmd: Any, path: list[str], parent: Any) -> None:
        ctx = click.Context(cmd, info_name=path[-1] if path else "dense-pt", parent=parent)
        subs = getattr(cmd, "commands", None)
        if subs is None or not path:  # the root's own options (--version, -q, -v) too
            lines.extend(_section(path, cmd, ctx))
        for name in sorted(subs or {}):
            if not subs[name].hidden:
                walk(subs[name], [*path, name], ctx)

    walk(root, [], None)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE} is stale: run python scripts/cli_reference.py", file=sys.stderr)
            return 1
        return 0
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
