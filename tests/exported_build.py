"""The shared pieces of the exported-model tests (tests/test_exported.py, tests/test_exported_trust.py): a tiny
model whose sentences end early, its one real AOTInductor build, and the ways those tests copy, carry, edit and
spoil a model folder and its packages."""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from hf_graphtf.self_check import matrix
from hf_graphtf.translation import package_store
from hf_graphtf.translation.aoti import MANIFEST, export_dir, export_model, store_dir, torch_export_problem
from hf_graphtf.translation.export_graphs import GRAPH_NAMES
from hf_graphtf.translation.inference import load_model, translate_texts


def ending_model(family: str, name: str, *, must_end_early: bool = True):
    """A tiny float32 model whose end-of-sentence token wins after a few steps in some rows (its output row scaled
    up, by the least of a few factors that does it for this model: too much and every row ends at once), so that
    finished hypotheses and the padding after them are decoded too."""
    model = matrix.tiny_model(family, matrix.OPTION_MATRIX[name], dtype=torch.float32)
    input_ids, attention_mask = sources()
    row = model.get_output_embeddings().weight[matrix.EOS].detach().clone()
    for factor in (1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0, 9.0):
        with torch.no_grad():
            model.get_output_embeddings().weight[matrix.EOS] = row * factor
            greedy = model.generate(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=12)
        if (greedy[:, 1:-1] == matrix.EOS).any():
            return model
    if must_end_early:
        raise AssertionError(f"{family} {name}: no factor made a sentence end early; the check would not see one")
    return model  # a few option sets of the whole matrix: every row ends at once, or none does


#: the searches `translate` and `evaluate` run, with the generation options they pass or a config carries
SEARCHES = {
    "greedy": {"num_beams": 1},
    "beam": {"num_beams": 3, "length_penalty": 0.6, "min_new_tokens": 2},
}


def assert_decodes_as_generate(model, decoding, label: str) -> dict[str, bool]:
    """``decoding`` (an `ExportedDecoding`) gives ``model.generate``'s tokens on `sources`, in each of
    `SEARCHES`; returns, per search, whether a sentence ended early (so that finished rows were decoded too)."""
    input_ids, attention_mask = sources()
    ended_early = {}
    for search, options in SEARCHES.items():
        kwargs = dict(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=12, **options)
        with torch.inference_mode():
            eager = model.generate(**kwargs)
            exported = decoding.generate(model, **kwargs)
        assert torch.equal(exported, eager), f"{label} {search}:\n{exported}\n{eager}"
        ended_early[search] = bool((eager[:, 1:-1] == matrix.EOS).any())
    return ended_early


def sources() -> tuple[torch.Tensor, torch.Tensor]:
    """Four sources of different lengths, right-padded."""
    rows = [[5, 6, 7, 8, 9, 10, 11, 12], [13, 14, 15], [16, 17, 18, 19, 20], [21, 22]]
    length = max(map(len, rows)) + 1
    ids = torch.full((len(rows), length), matrix.PAD)
    for index, row in enumerate(rows):
        ids[index, : len(row) + 1] = torch.tensor([*row, matrix.EOS])
    return ids, (ids != matrix.PAD).long()


def build_exported(tmp_path_factory, tokenizer, worker_id: str) -> Built:
    """A tiny linked model (cumulative link in encoder and decoder) saved with a tokenizer and built in fp32
    into the test run's store (conftest's ``HF_GRAPHTF_CACHE``, shared by the run's workers): the model folder,
    the export's lines and the packages' folder. Built once a run: the first worker to ask builds it under a
    lock, and the others, whose test files ask too, find it (a build is about a minute of a core)."""
    if torch_export_problem():
        pytest.skip(torch_export_problem())
    base = tmp_path_factory.getbasetemp()
    base = base if worker_id == "master" else base.parent  # shared by the run's workers
    folder, record = base / "exported-model", base / "exported-model.json"
    with open(base / "exported-model.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.is_file():
            model = ending_model("marian", "al-both-cum")
            model.save_pretrained(folder)
            tokenizer.save_pretrained(folder)
            lines: list[str] = []
            threads = torch.get_num_threads()
            torch.set_num_threads(1)  # built as under OMP_NUM_THREADS=1: the package must still run on more
            try:
                packages = export_model(folder, "fp32", progress=lines.append, command="hf-graphtf export --model DIR")
            finally:
                torch.set_num_threads(threads)
            record.write_text(json.dumps({"lines": lines, "packages": str(packages)}), encoding="utf-8")
    built = json.loads(record.read_text(encoding="utf-8"))
    return Built(folder, built["lines"], Path(built["packages"]))


@dataclass(frozen=True)
class Built:
    """What the `exported` fixture built: ``folder`` (the model), ``lines`` (the export's), ``packages``."""

    folder: Path
    lines: list[str]
    packages: Path


TEXTS = ["w5 w6 w7 w8 w9", "", "w13 w14", "w16 w17 w18 w19 w20 w21 w22 w23", "w21"]


def translate_with(folder, engine: str, trust_exported: bool = False, **options) -> tuple[list[str], object]:
    tokenizer, model = load_model(str(folder), "cpu", "fp32", engine=engine, trust_exported=trust_exported)
    options = {"num_beams": 3, "max_new_tokens": 10, **options}
    return translate_texts(tokenizer, model, TEXTS, progress=False, batch_size=2, **options), model


def copy_model(folder, tmp_path):
    copy = tmp_path / "model"
    shutil.copytree(folder, copy)
    return copy


def empty_store(tmp_path, monkeypatch) -> Path:
    """A store of its own for one test (a user who built nothing yet): the fixture's build is not in it."""
    monkeypatch.setenv(package_store.CACHE_ENV, str(tmp_path / "store"))
    return package_store.store_root()


def carrying(exported, tmp_path, monkeypatch) -> Path:
    """A copy of the model folder carrying the fixture's packages in ``exported/fp32``, as a folder built on
    another machine arrives, seen by a user whose store is empty."""
    folder = copy_model(exported.folder, tmp_path)
    shutil.copytree(exported.packages, export_dir(folder, "fp32"))
    empty_store(tmp_path, monkeypatch)
    return folder


def edit_config(folder, **changes):
    path = folder / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}), encoding="utf-8")


def edit_manifest(folder, **changes):
    path = export_dir(folder, "fp32") / MANIFEST
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}), encoding="utf-8")


def write_without_metadata(package, into) -> None:
    """``package`` with its metadata files emptied, as one build left it while another build of the same
    model rewrote them in Inductor's shared cache (a ``kernel_metadata.json`` of 0 bytes): it does not load."""
    spoiled = into.with_name(into.name + ".spoiled")
    with zipfile.ZipFile(package) as source, zipfile.ZipFile(spoiled, "w") as target:
        for info in source.infolist():
            target.writestr(info, b"" if info.filename.endswith("_metadata.json") else source.read(info))
    spoiled.replace(into)


def rewrite_digests(folder) -> None:
    """The manifest's package digests made to match the packages as they now are, as a folder's author can."""
    packages = export_dir(folder, "fp32")
    edit_manifest(
        folder,
        packages={name: hashlib.sha256((packages / f"{name}.pt2").read_bytes()).hexdigest() for name in GRAPH_NAMES},
    )


def broken_when_built(folder) -> None:
    """The encoder's package as a racing build left it, with the digest of what was built in the manifest."""
    path = export_dir(folder, "fp32") / "encoder.pt2"
    write_without_metadata(path, path)
    rewrite_digests(folder)


def fake_builds(monkeypatch, packages: Path, *, broken: str | None = None) -> list[str]:
    """AOTInductor's build replaced by a copy of the package in ``packages`` for each graph (``broken``: that
    graph's with its metadata emptied); returns the Inductor cache folder each build ran in."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    caches: list[str] = []

    def build(program, package_path, inductor_configs):
        caches.append(cache_dir())
        built = packages / Path(package_path).name
        if Path(package_path).stem == broken:
            write_without_metadata(built, Path(package_path))
        else:
            shutil.copy(built, package_path)
        return package_path

    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", build)
    return caches


def own_copy(exported, tmp_path, monkeypatch) -> Path:
    """A store of this test's own holding the fixture's build, as the user's; returns the packages' folder."""
    empty_store(tmp_path, monkeypatch)
    packages = store_dir(exported.folder, "fp32")
    shutil.copytree(exported.packages, packages)
    for path in packages.glob("*.pt2"):
        package_store.record_built(path)
    return packages
