"""Exported decoding (`hf-graphtf export`): the same translations as `generate`, and packages used only where
they fit.

Two levels. The graphs of `export_graphs`, run as torch.export programs, decode every family and option
(the default run: one involved case a family; ``-m slow``: the whole matrix) exactly as eager `generate`
does in float32, greedy and beam search, with sentences that end early.
Then one real build (AOTInductor, about a minute) of a tiny linked model into this process's store: what
`load_model`, `translate_texts` and the command line do with it; packages a folder carries, which run only where
this user built them or trusts them (a package with swapped shared objects never runs); and packages that do not
fit (another torch, another CPU, changed weights, a damaged file), which must decode eagerly and say why, never
translate wrongly.
"""

from __future__ import annotations

import platform
import warnings
import zipfile
from pathlib import Path

import pytest
import torch
from exported_build import (
    SEARCHES,
    TEXTS,
    assert_decodes_as_generate,
    broken_when_built,
    carrying,
    edit_config,
    edit_manifest,
    empty_store,
    ending_model,
    fake_builds,
    own_copy,
    sources,
    translate_with,
)

from hf_graphtf import cli
from hf_graphtf.folder_lock import FolderInUseError, hold_folder
from hf_graphtf.self_check import matrix
from hf_graphtf.transformers_seam import cache_tensors
from hf_graphtf.translation import package_store
from hf_graphtf.translation.aoti import (
    MANIFEST,
    ExportError,
    ExportManifest,
    cpu_instruction_set,
    export_dir,
    export_model,
    exportable_dtypes,
    model_digest,
    store_dir,
)
from hf_graphtf.translation.export_graphs import GRAPH_NAMES, export_graphs
from hf_graphtf.translation.exported_decoding import ExportedDecoding, ExportedFallbackWarning
from hf_graphtf.translation.inference import load_model, translate_texts

#: the default run's cases, one a family: the link in both stacks, the gated decoder link, and the graph
#: encoder beside the decoder link (each export traces three graphs: seconds a case)
FAST_CASES = (("marian", "al-both-cum"), ("bart", "graph-gate+al-dec-cum"), ("m2m_100", "al-dec-cum-gate"))


def _cases(fast: bool) -> list[tuple[str, str]]:
    return [
        (family, name)
        for family in matrix.FAMILIES
        for name in matrix.options_for(family)
        if ((family, name) in FAST_CASES) == fast
    ]


def _traced_decoding(model) -> ExportedDecoding:
    """``model``'s graphs as torch.export programs run as they are (no compiler), in an `ExportedDecoding`."""
    programs = export_graphs(model)
    return ExportedDecoding({graph: programs[graph].module() for graph in GRAPH_NAMES})


def _check_programs_decode_as_generate(family: str, name: str, must_end_early: bool = True) -> None:
    model = ending_model(family, name, must_end_early=must_end_early)
    ended_early = assert_decodes_as_generate(model, _traced_decoding(model), f"{family} {name}")
    assert any(ended_early.values()) or not must_end_early, (
        "no sentence ended early: the check would not see finished hypotheses"
    )


@pytest.mark.parametrize("family,name", _cases(fast=True))
def test_exported_graphs_decode_as_generate(family, name):
    _check_programs_decode_as_generate(family, name)


@pytest.mark.slow
@pytest.mark.parametrize("family,name", _cases(fast=False))
def test_exported_graphs_decode_as_generate_whole_matrix(family, name):
    _check_programs_decode_as_generate(family, name, must_end_early=False)


def test_beam_search_returns_the_eager_cache_though_the_steps_reorder_it():
    """The graphs' step does beam search's cache reorder (deferred to it); the cache `generate` returns is
    still reordered as eagerly, and ``_reorder_cache`` is the model's own again after the call."""
    model = ending_model("marian", "al-both-cum")
    decoding = _traced_decoding(model)
    input_ids, attention_mask = sources()
    kwargs = dict(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=6, num_beams=3)
    kwargs |= dict(return_dict_in_generate=True)
    with torch.inference_mode():
        eager = model.generate(**kwargs)
        exported = decoding.generate(model, **kwargs)
    assert torch.equal(exported.sequences, eager.sequences)
    eager_cache, exported_cache = (cache_tensors(out.past_key_values.self_attention_cache) for out in (eager, exported))
    assert len(exported_cache) == len(eager_cache) > 0
    for ours, theirs in zip(exported_cache, eager_cache):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    assert "_reorder_cache" not in vars(model)


def _keep_all_scores(input_ids, scores):
    return scores


#: a call's output carrying every row's scores (and cache), not the tokens alone
EVERY_ROW = {"return_dict_in_generate": True, "output_scores": True}
#: calls whose rows `generate` stops reading (the ended rows of greedy search, the done sentences' beams),
#: and whether the exported steps may leave those rows out
SEARCH_CALLS = {
    "greedy, tokens only": ({"num_beams": 1}, True),
    "beam, tokens only": ({"num_beams": 3, "length_penalty": 0.6}, True),
    "beam, not stopping early": ({"num_beams": 3, "early_stopping": False}, True),
    "greedy, return_dict_in_generate": ({"num_beams": 1, **EVERY_ROW}, False),
    "beam, return_dict_in_generate": ({"num_beams": 3, **EVERY_ROW}, False),
    "greedy, a logits processor of the caller's": ({"num_beams": 1, "logits_processor": _keep_all_scores}, False),
    "beam, a logits processor of the caller's": ({"num_beams": 3, "logits_processor": _keep_all_scores}, False),
}


@pytest.mark.parametrize("call", SEARCH_CALLS)
def test_rows_generate_stops_reading_are_left_out_of_the_later_steps(call):
    """A row whose logits `generate` no longer reads (a greedy row after its end token, the beams of a
    sentence beam search is done with) is left out of the exported steps, with the same tokens; where the
    call returns more than the tokens or a processor of the caller's reads every row's logits, every row is
    decoded to the end, as eagerly."""
    from transformers import LogitsProcessorList

    options, drops = SEARCH_CALLS[call]
    if "logits_processor" in options:
        options = {**options, "logits_processor": LogitsProcessorList([options["logits_processor"]])}
    model = ending_model("marian", "al-both-cum")
    decoding = _traced_decoding(model)
    step, rows_decoded = decoding.graphs["decoder_step"], []

    def counted_step(token, *rest):
        rows_decoded.append(token.shape[0])
        return step(token, *rest)

    decoding.graphs["decoder_step"] = counted_step
    input_ids, attention_mask = sources()
    kwargs = dict(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=12, **options)
    with torch.inference_mode():
        eager = model.generate(**kwargs)
        exported = decoding.generate(model, **kwargs)
    if "return_dict_in_generate" in options:
        assert all(torch.equal(ours, theirs) for ours, theirs in zip(exported.scores, eager.scores, strict=True))
        eager, exported = eager.sequences, exported.sequences
    assert torch.equal(exported, eager), f"{exported}\n{eager}"
    sentences, rows = len(input_ids), len(input_ids) * options["num_beams"]
    assert rows_decoded[0] == sentences and max(rows_decoded[1:]) == rows
    if not drops:
        assert rows_decoded[1:] == [rows] * (len(rows_decoded) - 1)
        return
    assert rows_decoded[1:] == sorted(rows_decoded[1:], reverse=True), "a row left out came back"
    assert min(rows_decoded) < rows, "no row was left out"
    if options["num_beams"] == 1:  # the step feeding column t decodes the rows with no end token up to it
        ended = (eager[:, 1:] == matrix.EOS).cumsum(dim=1) > 0
        going = [int((~ended[:, t - 1]).sum()) for t in range(1, eager.shape[1] - 1)]
        assert rows_decoded[1:] == [count for count in going if count]


@pytest.mark.parametrize("family,name", FAST_CASES)
def test_no_graph_looks_up_the_embedding_table(family, name):
    """The graphs take the tokens' embeddings, looked up from the loaded model, so an int8 package does not
    store the fp32 table (twice, the encoder's and the decoder's): no graph indexes it (the decoder step
    still multiplies by it, as its tied output layer)."""
    model = matrix.tiny_model(family, matrix.OPTION_MATRIX[name], dtype=torch.float32)
    tables = {model.get_encoder().embed_tokens.weight.data_ptr(), model.get_decoder().embed_tokens.weight.data_ptr()}
    parameters = dict(model.named_parameters(remove_duplicate=False))
    for graph, program in export_graphs(model).items():
        # as the compiler does: dropout (an identity here, in eval mode) counts as dead code too
        program.graph.eliminate_dead_code(is_impure_node=lambda node: node.op in ("placeholder", "output"))
        inputs = program.graph_signature.inputs_to_parameters
        looked_up = [
            inputs[node.args[0].name]
            for node in program.graph.nodes
            if node.target == torch.ops.aten.embedding.default and node.args[0].name in inputs
        ]
        tokens = [fqn for fqn in looked_up if parameters[fqn.removeprefix("model.")].data_ptr() in tables]
        assert not tokens, f"{family} {name} {graph}: {tokens}"


def test_options_the_graphs_do_not_give_decode_eagerly_and_say_so():
    model = ending_model("marian", "al-both-cum")
    decoding = _traced_decoding(model)
    input_ids, attention_mask = sources()
    kwargs = dict(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=6)
    with pytest.warns(ExportedFallbackWarning, match="output_attentions"):
        out = decoding.generate(model, **kwargs, output_attentions=True, return_dict_in_generate=True)
    assert out.decoder_attentions is not None  # what was asked for, eagerly
    with pytest.warns(ExportedFallbackWarning, match="use_cache=False"):
        decoding.generate(model, **kwargs, use_cache=False)
    assert "forward" not in vars(model) and "get_encoder" not in vars(model)  # nothing left bound after a call


# --------------------------------------------------------------------------- one real build


def test_an_exported_model_translates_as_the_eager_one_and_says_so(exported):
    folder, lines = exported.folder, exported.lines
    summary = "graph_marian (al_both_cumulative: attention_link=both, attention_link_mode=cumulative)"
    assert lines[0] == f"exporting {summary} in fp32: tracing {len(GRAPH_NAMES)} graphs"
    graphs = len(GRAPH_NAMES)
    assert any(f"({graphs}/{graphs})" in line for line in lines) and lines[-1].startswith("exported to")
    manifest = ExportManifest.read(exported.packages)
    assert manifest.torch == torch.__version__ and manifest.dtype == "fp32" and manifest.build_seconds > 0
    assert manifest.build_command == "hf-graphtf export --model DIR" and set(manifest.packages) == set(GRAPH_NAMES)
    for search in ({"num_beams": 3}, {"num_beams": 1}):
        eager, eager_model = translate_with(folder, "eager", **search)
        auto, auto_model = translate_with(folder, "auto", **search)
        assert auto == eager and eager[1] == ""
        assert auto_model.exported_decoding is not None and eager_model.exported_decoding is None
    assert "decoding with the exported fp32 package you built" in auto_model.decoding_setup.reason
    assert "exported" not in eager_model.decoding_setup.reason


def test_an_export_writes_nothing_into_the_model_folder_and_builds_into_the_users_store(exported):
    """The model folder stays data: the packages are in this user's store, under the model's digest, the format,
    torch and the CPU, so nothing native leaves with the folder (copied, saved again or pushed)."""
    assert not (exported.folder / "exported").exists()
    assert exported.packages == store_dir(exported.folder, "fp32")
    assert exported.packages.is_relative_to(package_store.store_root())
    assert exported.packages.parent.name == model_digest(exported.folder)[:32]
    assert exported.packages.name.startswith(f"fp32-torch{torch.__version__}-")


def test_the_packages_hold_no_weights(exported):
    """The weights are the model's own, handed to each graph when it loads: stored once, not in every package."""
    for graph in GRAPH_NAMES:
        with zipfile.ZipFile(exported.packages / f"{graph}.pt2") as package:
            names = package.namelist()
        assert not [name for name in names if "constant" in name or "weights" in name], names


def test_an_export_leaves_no_lock_file(exported):
    """The export's lock file names the host that built it: gone once the export ends."""
    assert not [path.name for path in exported.packages.parent.iterdir() if path.suffix == ".lock"]


def test_the_packages_run_on_the_threads_torch_is_set_to(exported):
    """Their kernels are parallel with the thread count read at run time, not the build process's written in
    (the fixture builds on one thread: built as it was, a package would stay serial under ``--threads 2``)."""
    for graph in GRAPH_NAMES:
        with zipfile.ZipFile(exported.packages / f"{graph}.pt2") as package:
            code = "".join(package.read(name).decode() for name in package.namelist() if name.endswith(".cpp"))
        assert "#pragma omp parallel" in code and "num_threads(" not in code, graph


@pytest.mark.parametrize(
    "spoil,said",
    [
        (lambda folder: edit_manifest(folder, torch="2.0.0"), "built for torch 2.0.0"),
        (lambda folder: edit_manifest(folder, cpu_instruction_set="AVX2"), "built for a CPU with AVX2"),
        (lambda folder: (export_dir(folder, "fp32") / "decoder_step.pt2").write_bytes(b"cut short"), "is damaged"),
        (lambda folder: (export_dir(folder, "fp32") / "encoder.pt2").unlink(), "encoder.pt2 is missing"),
        (lambda folder: (export_dir(folder, "fp32") / MANIFEST).write_text("{", encoding="utf-8"), "is damaged"),
        (lambda folder: edit_config(folder, attention_link_mode="previous"), "weights or configuration changed"),
        (lambda folder: edit_manifest(folder, packages={"first_step": "", "later_step": ""}), "an earlier hf_graphtf"),
        (lambda folder: edit_manifest(folder, graph_layout=2), "an earlier hf_graphtf (layout 2)"),
        (lambda folder: edit_manifest(folder, weights="package"), "int8 quantized activations per batch"),
        (broken_when_built, "encoder.pt2 does not load"),
    ],
    ids=[
        "torch",
        "cpu",
        "damaged",
        "missing",
        "manifest",
        "configuration",
        "graphs",
        "layout",
        "per-batch int8",
        "broken when built",
    ],
)
def test_a_trusted_package_that_does_not_fit_decodes_eagerly_and_says_why(exported, tmp_path, monkeypatch, spoil, said):
    folder = carrying(exported, tmp_path, monkeypatch)
    spoil(folder)
    translations, model = translate_with(folder, "auto", trust_exported=True)
    assert model.exported_decoding is None
    assert f"eager decoding, as the exported fp32 package in {export_dir(folder, 'fp32')} does not fit" in (
        model.decoding_setup.reason
    )
    assert said in model.decoding_setup.reason
    assert translations == translate_with(folder, "eager")[0]
    with pytest.raises(ExportError, match="engine 'exported' asked for"):
        load_model(str(folder), "cpu", "fp32", engine="exported", trust_exported=True)


def test_the_cpu_check_names_the_instruction_set_inductor_compiles_for():
    """Loading reads the CPU's features instead of test-compiling as Inductor does (seconds at each load): both
    must name the same instruction set, or every package would be refused as built for another CPU."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    assert cpu_instruction_set() == str(pick_vec_isa()).upper()


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="the CPU's features are read on x86")
def test_loading_a_package_test_compiles_nothing(exported, monkeypatch):
    """Every translate loads the packages: neither the manifest's CPU check nor torch's package loader may run
    Inductor's test compilations (`pick_vec_isa`: seconds at each load)."""
    from torch._inductor import cpu_vec_isa

    def test_compiles():
        raise AssertionError("loading a package ran Inductor's instruction-set test compilations")

    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    monkeypatch.setattr(cpu_vec_isa, "pick_vec_isa", test_compiles)
    _, model = load_model(str(exported.folder), "cpu", "fp32", engine="exported")
    assert model.exported_decoding is not None


def test_the_command_line_exports_and_translates_with_the_package(exported, tmp_path, capsys):
    folder = exported.folder
    (tmp_path / "in.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    argv = ["translate", "--model", str(folder), "--input", str(tmp_path / "in.txt"), "--quiet"]
    argv += ["--beam-size", "3", "--max-new-tokens", "10"]
    fp32 = [*argv, "--dtype", "fp32"]
    assert cli.main([*fp32, "--engine", "exported", "--output", str(tmp_path / "exported.txt")]) == 0
    assert "decoding with the exported fp32 package you built" in capsys.readouterr().err
    assert cli.main([*fp32, "--engine", "eager", "--output", str(tmp_path / "eager.txt")]) == 0
    assert (tmp_path / "exported.txt").read_text() == (tmp_path / "eager.txt").read_text()
    # bf16 has no package here: auto decodes eagerly and says that the packages there are not for it
    assert cli.main([*argv, "--dtype", "bf16", "--output", str(tmp_path / "bf16.txt")]) == 0
    assert "eager decoding, as no exported bf16 package" in capsys.readouterr().err
    assert cli.main([*argv, "--dtype", "bf16", "--engine", "exported"]) == 2
    assert "engine 'exported' asked for, but no exported bf16 package" in capsys.readouterr().err
    # evaluate says which engine translated, as translate does
    evaluate = ["evaluate", "--model", str(folder), "--source", str(tmp_path / "in.txt"), "--quiet"]
    evaluate += ["--references", str(tmp_path / "eager.txt"), "--max-new-tokens", "10", "--beam-size", "3"]
    assert cli.main(evaluate) == 0
    out = capsys.readouterr()
    assert "decoding with the exported fp32 package you built" in out.err and "BLEU 100.0" in out.out


def test_an_export_builds_in_a_cache_of_its_own_and_deletes_it(exported, tmp_path, monkeypatch):
    """Inductor's shared cache let two builds of one model at once break a package (`_own_inductor_cache`)."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    empty_store(tmp_path, monkeypatch)
    caches = fake_builds(monkeypatch, exported.packages)
    export_model(exported.folder, "fp32", progress=lambda line: None)
    assert len(caches) == len(GRAPH_NAMES) and len(set(caches)) == 1
    assert not caches[0].startswith(default_cache_dir()) and not Path(caches[0]).exists()
    _, model = load_model(str(exported.folder), "cpu", "fp32", engine="exported")
    assert model.exported_decoding is not None


def test_a_second_export_replaces_the_first_and_a_broken_one_keeps_it(exported, tmp_path, monkeypatch):
    """Each package is loaded once as it is built: one that would not load is not kept, and the packages built
    before stay as they were and are still used; a good second export replaces them."""
    packages = own_copy(exported, tmp_path, monkeypatch)
    manifest = (packages / MANIFEST).read_bytes()
    caches = fake_builds(monkeypatch, exported.packages, broken="decoder_step")
    with pytest.raises(ExportError, match=r"nothing was kept, as .* decoder_step\.pt2 does not load"):
        export_model(exported.folder, "fp32", progress=lambda line: None)
    assert (packages / MANIFEST).read_bytes() == manifest
    assert not (packages.parent / f".building-{packages.name}").exists()
    assert not Path(caches[0]).exists()
    assert load_model(str(exported.folder), "cpu", "fp32", engine="exported")[1].exported_decoding is not None
    fake_builds(monkeypatch, exported.packages)
    export_model(exported.folder, "fp32", progress=lambda line: None, command="second")
    assert ExportManifest.read(packages).build_command == "second"
    assert load_model(str(exported.folder), "cpu", "fp32", engine="exported")[1].exported_decoding is not None


def test_a_second_export_of_a_model_in_a_format_is_refused_while_one_runs(exported, tmp_path, monkeypatch, capsys):
    """A second export would delete the first's building folder: it is refused before it loads anything, in one
    line naming the process that holds the folder, and the packages there stay and are used."""
    packages = own_copy(exported, tmp_path, monkeypatch)
    manifest = (packages / MANIFEST).read_bytes()
    folder = exported.folder
    with hold_folder(packages.parent, f".export-{packages.name}.lock", lambda holder: holder):  # a live export
        with pytest.raises(FolderInUseError, match=f"{folder} is being exported in fp32 to .* by another process"):
            export_model(folder, "fp32")
        assert cli.main(["export", "--model", str(folder), "--dtype", "fp32"]) == 2
        errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "is being exported in fp32" in errors[0]
        assert load_model(str(folder), "cpu", "fp32", engine="exported")[1].exported_decoding is not None
    assert (packages / MANIFEST).read_bytes() == manifest


def test_export_refuses_what_it_cannot_build_before_building(tmp_path, monkeypatch, capsys, exported):
    assert "fp16" not in exportable_dtypes()
    with pytest.raises(SystemExit):
        cli.main(["export", "--model", str(exported.folder), "--dtype", "fp16"])
    assert "dtype must be one of fp32, bf16, int8" in capsys.readouterr().err
    with pytest.raises(ExportError, match="saved model folder"):
        export_model(tmp_path / "missing", "fp32")
    monkeypatch.setenv("PATH", str(tmp_path))  # no compiler anywhere
    monkeypatch.delenv("CXX", raising=False)
    with pytest.raises(ExportError, match="needs a C\\+\\+ compiler"):
        export_model(exported.folder, "fp32")


def test_no_package_means_no_line_and_eager_decoding(tmp_path, tiny_tokenizer):
    folder = tmp_path / "model"
    matrix.tiny_model("marian", {}, dtype=torch.float32).save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExportedFallbackWarning)
        _, model = load_model(str(folder), "cpu", "fp32")
    assert model.exported_decoding is None and model.decoding_setup.reason == "translating in fp32"


@pytest.mark.slow
def test_an_int8_export_takes_its_weights_from_the_model_and_translates_a_line_alike_in_any_batch(exported, tmp_path):
    """int8 exports the model as translate loads it in int8 (`int8_linear`'s layers): the package holds no
    weights, its products are int8 ones, and it translates every line, each the same alone as in the batch
    (activations scaled per row; its cost in BLEU is measured on a trained model)."""
    folder = exported.folder
    packages = export_model(folder, "int8", progress=lambda line: None)
    assert ExportManifest.read(packages).weights == "model"
    for package in packages.glob("*.pt2"):  # its products run as int8 GEMMs, not in float
        with zipfile.ZipFile(package) as archive:
            code = "".join(archive.read(name).decode() for name in archive.namelist() if name.endswith(".cpp"))
        assert "_int_mm" in code, package.name
    tokenizer, model = load_model(str(folder), "cpu", "int8")
    assert "decoding with the exported int8 package" in model.decoding_setup.reason
    translations = translate_texts(tokenizer, model, TEXTS, progress=False, num_beams=3, max_new_tokens=10)
    assert [bool(text) for text in translations] == [bool(text) for text in TEXTS]
    alone = [
        translate_texts(tokenizer, model, [text], progress=False, num_beams=3, max_new_tokens=10)[0] for text in TEXTS
    ]
    assert alone == translations


def test_the_int8_graphs_hold_the_int8_layers_and_compute_what_they_compute(exported):
    """Traced from the model loaded in int8, each graph multiplies in int8 (``_int_mm``, no float linear
    product left) and, run as traced, decodes eager int8's tokens: the package compiles these graphs."""
    _, model = load_model(str(exported.folder), "cpu", "int8", engine="eager")
    programs = export_graphs(model)
    for name in GRAPH_NAMES:
        targets = [str(node.target) for node in programs[name].graph.nodes if node.op == "call_function"]
        assert any("_int_mm" in target for target in targets), name
        assert not any(target.endswith(("linear.default", "addmm.default")) for target in targets), name
    decoding = ExportedDecoding({name: programs[name].module() for name in GRAPH_NAMES})
    input_ids, attention_mask = sources()
    for search, options in SEARCHES.items():
        kwargs = dict(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=8, **options)
        with torch.inference_mode():
            assert torch.equal(decoding.generate(model, **kwargs), model.generate(**kwargs)), search


def test_the_export_command_builds_the_format_asked_and_records_the_command(monkeypatch, tmp_path):
    from hf_graphtf import model_files
    from hf_graphtf.translation import aoti

    calls = []
    monkeypatch.setattr(aoti, "export_model", lambda *args, **kwargs: calls.append((args, kwargs)))
    monkeypatch.setattr(model_files, "check_model_source", lambda name, **checks: None)  # no model: the call is tested
    assert cli.main(["export", "--model", str(tmp_path), "--dtype", "bfloat16"]) == 0
    command = f"hf-graphtf export --model {tmp_path} --engine aoti --dtype bf16"
    assert calls == [((str(tmp_path), "bf16"), {"output": None, "command": command})]
    assert cli.main(["export", "--model", str(tmp_path), "--dtype", "fp32", "--output", "carry"]) == 0
    assert calls[1] == ((str(tmp_path), "fp32"), {"output": "carry", "command": f"{command[:-4]}fp32 --output carry"})
