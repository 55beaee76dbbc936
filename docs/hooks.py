"""MkDocs hook: the repository's root documents are pages of the site too.

README.md, ARCHITECTURE.md, BENCHMARKS.md, CHANGELOG.md and DEVELOPERS.md stay where a reader of the repository
looks for them, one copy each; the site reads them from there (README.md is its home page). Every
page is written with links that work on GitHub (`docs/cli.md` from the README, `../BENCHMARKS.md`
from a docs page); this hook maps those paths onto the site's pages before MkDocs checks the links,
so `mkdocs build --strict` catches a broken one on either side.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

# root document -> its page on the site (mkdocs.yml's nav names these pages)
ROOT_PAGES = {
    "README.md": "index.md",
    "ARCHITECTURE.md": "architecture.md",
    "BENCHMARKS.md": "benchmarks.md",
    "CHANGELOG.md": "changelog.md",
    "DEVELOPERS.md": "developers.md",
}

_LINK = re.compile(r"\]\((?!https?://|#)([^)\s]+)\)")


def on_files(files: Files, config: Any) -> Files:
    root = Path(config.config_file_path).parent
    for name, page in ROOT_PAGES.items():
        files.append(File.generated(config, page, abs_src_path=str(root / name)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    at_root = page.file.src_uri in ROOT_PAGES.values()
    return _LINK.sub(lambda m: f"]({_site_target(m.group(1), at_root)})", markdown)


def _site_target(target: str, at_root: bool) -> str:
    """A GitHub-relative link target as the site's: from a root document, `docs/X` is page X and
    another root document its page; from a docs page, `../ROOT.md` is that document's page."""
    path, hash_, anchor = target.partition("#")
    prefix = "" if at_root else "../"
    if path.startswith(prefix) and path[len(prefix) :] in ROOT_PAGES:
        path = ROOT_PAGES[path[len(prefix) :]]
    elif at_root and path.startswith("docs/"):
        path = path[len("docs/") :]
    return path + hash_ + anchor
