"""The README's usage example runs as written, and the committed pages' links lead somewhere."""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
README = REPO_ROOT / "README.md"


def test_readme_usage_example_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python example"
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks[0], "README.md", "exec"), {})
    assert (tmp_path / "my-model" / "model.safetensors").exists()


def test_committed_pages_link_to_files_that_exist():
    """Relative links in the README and the pages it links (results, benchmarks, model cards) name files in
    the repository: a renamed page or figure must not leave a dead link behind."""
    pages = [README, *REPO_ROOT.glob("recipes/*/*.md"), *REPO_ROOT.glob("model_cards/**/*.md")]
    checked = 0
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://", "#", "mailto:")):
                continue
            assert (page.parent / target.split("#")[0]).exists(), f"{page.relative_to(REPO_ROOT)} links {target}"
            checked += 1
    assert checked >= 10
