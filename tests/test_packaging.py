"""The package as a user gets it from `pip install`: a built wheel, not this checkout.

Every test elsewhere runs the editable install, which reads files straight from the repository, so a data
file left out of the wheel (the model card's template, the metric's card) or code that assumes a checkout
would pass them all. Here the wheel is built, installed into a fresh virtualenv that borrows this one's
dependencies, and used from a folder outside the repository that is itself a git repository, as a user's
project is: the `hf-graphtf` command trains, writes its card and results, and the model loads back.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from recipe_fixtures import REPO_ROOT, subprocess_env, tiny_recipe, write_recipe, write_tiny_corpus

from hf_graphtf.training.tooling import software_record


def _git(folder: Path, *args: str) -> str:
    command = ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()


def _repository(folder: Path) -> str:
    """A git repository with one commit at ``folder``; returns the commit."""
    folder.mkdir(parents=True, exist_ok=True)
    _git(folder, "init", "-q")
    _git(folder, "commit", "-q", "--allow-empty", "-m", "start")
    return _git(folder, "rev-parse", "HEAD")


def test_the_commit_recorded_is_the_package_checkouts_not_a_repository_it_is_installed_in(tmp_path):
    """A virtualenv inside the user's repository must not lend that repository's commit to the package."""
    project = tmp_path / "project"
    commit = _repository(project)
    site_packages = project / ".venv" / "lib" / "python3.11" / "site-packages"
    site_packages.mkdir(parents=True)
    installed = software_record(root=site_packages)
    assert installed["commit"] is None and installed["code_changed_from_commit"] == []
    assert installed["packages"]["hf_graphtf"]  # the version says what ran

    # the top of a checkout: its commit, and the tracked files under code_paths that differ from it
    (project / "hf_graphtf").mkdir()
    (project / "hf_graphtf" / "code.py").write_text("x = 1\n")
    _git(project, "add", "hf_graphtf")
    _git(project, "commit", "-q", "-m", "code")
    (project / "hf_graphtf" / "code.py").write_text("x = 2\n")
    checkout = software_record(root=project)
    assert checkout["commit"] == _git(project, "rev-parse", "HEAD") != commit
    assert checkout["code_changed_from_commit"] == ["hf_graphtf/code.py"]

    assert software_record(root=tmp_path / "no-repository")["commit"] is None


@pytest.fixture(scope="module")
def tracked() -> list[str]:
    """The package's files git tracks (what a clone or an sdist holds)."""
    try:
        files = _git(REPO_ROOT, "ls-files", "hf_graphtf").splitlines()
    except (OSError, subprocess.CalledProcessError):
        files = []
    if not files:
        pytest.skip("not a git checkout: which files the package has is not known")
    return files


@pytest.fixture(scope="module")
def wheel(tracked, tmp_path_factory) -> Path:
    """The wheel `pip` builds from the tracked files alone, copied out of the checkout (what is built there is
    left alone, and no stale build folder can lend the wheel a file); without build isolation: no network."""
    pytest.importorskip("setuptools", minversion="77", reason="builds the wheel without isolation (pyproject.toml)")
    source = tmp_path_factory.mktemp("source")
    for path in [*tracked, "pyproject.toml", "README.md", "LICENSE"]:
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / path, source / path)
    out = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out)]
    subprocess.run([*command, str(source)], check=True, capture_output=True, cwd=out)
    (built,) = out.glob("hf_graphtf-*.whl")
    return built


def test_the_wheel_holds_every_file_of_the_package(tracked, wheel):
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    assert [path for path in tracked if path not in in_wheel] == []


@pytest.mark.slow
def test_an_installed_wheel_trains_writes_its_card_and_loads_back_outside_the_checkout(wheel, tmp_path):
    venv = tmp_path / "project" / ".venv"
    _repository(tmp_path / "project")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    # the dependencies of this interpreter, as plain folders (the editable install's finder is not run)
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    borrowed = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(purelib, "borrowed.pth").write_text("\n".join(sorted(borrowed)) + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)]
    subprocess.run(pip, check=True, capture_output=True)

    project = tmp_path / "project"
    corpus = write_tiny_corpus(project / "corpus")
    recipe = write_recipe(project / "recipe.yaml", tiny_recipe(corpus, project / "out", max_steps=2))
    env = subprocess_env()
    env.pop("PYTHONPATH", None)  # nothing of the checkout
    run = subprocess.run([venv / "bin" / "hf-graphtf", "train", str(recipe)], cwd=project, env=env,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads((project / "out" / "results.json").read_text())
    assert results["software"]["commit"] is None  # not the project's
    assert results["software"]["packages"]["hf_graphtf"]
    assert "attention_link" in (project / "out" / "README.md").read_text()  # the card, from the wheel's template

    load = (
        "import hf_graphtf, transformers; assert '/site-packages/hf_graphtf/' in hf_graphtf.__file__;"
        "model = transformers.AutoModelForSeq2SeqLM.from_pretrained('out');"
        "assert model.config.attention_link == 'both', model.config"
    )
    loaded = subprocess.run([python, "-c", load], cwd=project, env=env, capture_output=True, text=True)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
