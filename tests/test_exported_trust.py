"""Exported packages are native code (`package_store`): one a model folder carries runs only where this user built it
or trusts whoever did; otherwise nothing of it runs, not even a shared object swapped into it with its manifest
rewritten to match. This user's own builds are used unasked, a changed model never uses its earlier build, and
nothing native leaves with a saved or pushed model. These use the one real build (`exported_build`) and a C
compiler, as export does."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from exported_build import (
    TEXTS,
    carrying,
    copy_model,
    edit_config,
    empty_store,
    fake_builds,
    rewrite_digests,
    translate_with,
)

from hf_graphtf import cli
from hf_graphtf.translation import package_store
from hf_graphtf.translation.aoti import ExportError, export_dir, export_model, store_dir
from hf_graphtf.translation.export_graphs import GRAPH_NAMES
from hf_graphtf.translation.inference import load_model


def _marker_library(tmp_path, marker: Path) -> bytes:
    """A shared object whose constructor writes ``marker``: what a folder's author could put in a package."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        pytest.skip("no C compiler here to build a stand-in shared object (exporting needs one too)")
    source = tmp_path / "constructor.c"
    source.write_text(
        "#include <stdio.h>\n__attribute__((constructor)) static void run(void) {\n"
        f'  FILE *f = fopen("{marker}", "w"); if (f) {{ fputs("ran", f); fclose(f); }}\n}}\n',
        encoding="utf-8",
    )
    library = tmp_path / "constructor.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return library.read_bytes()


def _swap_shared_objects(folder, tmp_path) -> Path:
    """The carried packages with every shared object in them replaced by one that writes a marker when it loads,
    and the manifest's digests rewritten to match; returns the marker's path (absent until something runs)."""
    marker = tmp_path / "constructor-ran"
    library = _marker_library(tmp_path, marker)
    for name in GRAPH_NAMES:
        path = export_dir(folder, "fp32") / f"{name}.pt2"
        swapped = path.with_suffix(".swapped")
        with zipfile.ZipFile(path) as source, zipfile.ZipFile(swapped, "w") as target:
            objects = [info for info in source.infolist() if info.filename.endswith(".so")]
            assert objects, f"{name}.pt2 holds no shared object to swap"
            for info in source.infolist():
                target.writestr(info, library if info in objects else source.read(info))
        swapped.replace(path)
    rewrite_digests(folder)
    return marker


def test_a_swapped_package_in_a_folder_you_did_not_build_never_runs(exported, tmp_path, monkeypatch, capsys):
    """The copied folder's packages hold another shared object, and its manifest matches them: by default and
    with ``--engine exported``, nothing of them runs (the marker stays absent), one line says why and how to
    trust them, and the translation is the eager one."""
    folder = carrying(exported, tmp_path, monkeypatch)
    marker = _swap_shared_objects(folder, tmp_path)
    translations, model = translate_with(folder, "auto")
    assert not marker.exists() and model.exported_decoding is None
    reason = model.decoding_setup.reason
    assert "was not built by you on this machine, so it was not opened" in reason and "--trust-exported" in reason
    assert translations == translate_with(folder, "eager")[0]
    with pytest.raises(ExportError, match="engine 'exported' asked for, but the exported fp32 package .* not opened"):
        load_model(str(folder), "cpu", "fp32", engine="exported")
    assert not marker.exists()
    (tmp_path / "in.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    argv = ["translate", "--model", str(folder), "--input", str(tmp_path / "in.txt"), "--quiet", "--dtype", "fp32"]
    assert cli.main([*argv, "--beam-size", "3", "--max-new-tokens", "10", "--output", str(tmp_path / "out.txt")]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "not built by you" in line]
    assert len(lines) == 1 and (tmp_path / "out.txt").read_text().splitlines() == translations
    assert cli.main([*argv, "--engine", "exported"]) == 2
    assert "not opened" in capsys.readouterr().err and not marker.exists()
    # the environment variable is no flag either unless it says yes
    monkeypatch.setenv(package_store.TRUST_ENV, "0")
    assert translate_with(folder, "auto")[1].exported_decoding is None and not marker.exists()
    # the stand-in is what it claims: trusted, it runs (and then does not load as a package)
    translate_with(folder, "auto", trust_exported=True)
    assert marker.read_text() == "ran"


def test_a_trusted_package_is_used(exported, tmp_path, monkeypatch, capsys):
    """Built elsewhere and carried in the folder: used with ``trust_exported``, ``--trust-exported`` or
    ``HF_GRAPHTF_TRUST_EXPORTED=1``, and translating as the eager model does."""
    folder = carrying(exported, tmp_path, monkeypatch)
    eager = translate_with(folder, "eager")[0]
    translations, model = translate_with(folder, "exported", trust_exported=True)
    assert translations == eager and "package the model folder carries" in model.decoding_setup.reason
    monkeypatch.setenv(package_store.TRUST_ENV, "1")
    assert translate_with(folder, "exported")[1].exported_decoding is not None
    monkeypatch.delenv(package_store.TRUST_ENV)
    (tmp_path / "in.txt").write_text("w5 w6\n", encoding="utf-8")
    argv = ["translate", "--model", str(folder), "--input", str(tmp_path / "in.txt"), "--quiet", "--dtype", "fp32"]
    assert cli.main([*argv, "--engine", "exported", "--trust-exported"]) == 0
    assert "decoding with the exported fp32 package the model folder carries" in capsys.readouterr().err


def test_packages_you_built_to_carry_run_here_unasked_and_the_card_says_so(exported, tmp_path, monkeypatch):
    """``export --output MODEL/exported`` records its packages as this user's: they run here without trust
    (elsewhere, with it), and the folder's card says it carries native code, once however often it is built."""
    folder = copy_model(exported.folder, tmp_path)
    (folder / "README.md").write_text("# A model\n", encoding="utf-8")
    empty_store(tmp_path, monkeypatch)
    fake_builds(monkeypatch, exported.packages)
    for _ in range(2):
        built = export_model(folder, "fp32", output=folder / "exported", progress=lambda line: None)
    assert built == export_dir(folder, "fp32")
    assert not store_dir(folder, "fp32").exists()  # carried, not in the store
    _, model = load_model(str(folder), "cpu", "fp32", engine="exported")
    assert "package the model folder carries" in model.decoding_setup.reason
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert card.startswith("# A model\n") and card.count("## Exported packages (native code)") == 1
    assert "`exported/fp32/`" in card and "--trust-exported" in card
    shutil.rmtree(package_store.store_root())  # another machine (or user): nothing recorded there
    assert load_model(str(folder), "cpu", "fp32")[1].exported_decoding is None


def test_a_changed_model_never_uses_the_packages_of_its_earlier_files(exported, tmp_path, monkeypatch):
    """The store is keyed by the model's digest: edited weights or configuration find no package, and the line
    says that the folder's earlier files had one; the earlier build stays for the files it was built from."""
    folder = copy_model(exported.folder, tmp_path)
    empty_store(tmp_path, monkeypatch)
    fake_builds(monkeypatch, exported.packages)
    built = export_model(folder, "fp32", progress=lambda line: None)
    config = (folder / "config.json").read_bytes()
    edit_config(folder, attention_link_mode="previous")
    translations, model = translate_with(folder, "auto")
    assert model.exported_decoding is None
    reason = model.decoding_setup.reason
    assert f"no exported fp32 package for {folder} as its files are now" in reason and "earlier weights" in reason
    assert translations == translate_with(folder, "eager")[0]
    with pytest.raises(ExportError, match="as its files are now"):
        load_model(str(folder), "cpu", "fp32", engine="exported")
    assert built.is_dir() and built != store_dir(folder, "fp32")
    (folder / "config.json").write_bytes(config)  # its files as they were: its build again
    assert translate_with(folder, "auto")[1].exported_decoding is not None


def test_saving_or_pushing_a_model_carries_no_package(exported, tmp_path, monkeypatch):
    """``save_pretrained`` writes the model's own files, and the training script's Hub upload leaves out a
    folder's ``exported/`` (Transformers' ``Trainer.push_to_hub`` uploads all but ``_*`` and checkpoints)."""
    from huggingface_hub.utils import filter_repo_objects
    from transformers import AutoModelForSeq2SeqLM

    from hf_graphtf.training.hub import HUB_IGNORE_PATTERNS

    folder = carrying(exported, tmp_path, monkeypatch)
    AutoModelForSeq2SeqLM.from_pretrained(folder).save_pretrained(tmp_path / "saved")
    assert not list((tmp_path / "saved").rglob("*.pt2")) and not (tmp_path / "saved" / "exported").exists()
    files = [str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file()]
    uploaded = list(filter_repo_objects(files, ignore_patterns=HUB_IGNORE_PATTERNS))
    assert "config.json" in uploaded and not [name for name in uploaded if name.startswith("exported")]


def _record_in_another_process(paths: list[str], start) -> None:
    start.wait()
    for path in paths:
        package_store.record_built(Path(path))


def test_two_processes_recording_builds_at_once_keep_both(tmp_path, monkeypatch):
    """Two exports at once each record their packages; neither loses the other's (one file per digest)."""
    import multiprocessing

    store = empty_store(tmp_path, monkeypatch)
    files = []
    for index in range(40):
        files.append(tmp_path / f"package-{index}.pt2")
        files[-1].write_bytes(f"package {index}".encode())
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    workers = [
        context.Process(target=_record_in_another_process, args=([str(path) for path in files[half::2]], start))
        for half in (0, 1)
    ]
    for worker in workers:
        worker.start()
    start.set()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    assert store.is_dir() and package_store.built_here(files)
