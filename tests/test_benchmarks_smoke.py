"""The benchmark scripts run end to end on a tiny shape and print their tables (no timing assertions).

Also checks the analytic FLOP counter, whose bound the training table prints next to each measured
ratio, against torch's own matmul FLOP count for every variant.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

BENCHMARKS = Path(__file__).resolve().parents[1] / "recipes" / "benchmarks"
FAST = ["--size", "tiny", "--steps", "1", "--warmup", "1", "--threads", "1", "--no-progress"]
SOME = "aa,al-prev-both,al-cum-decoder,graph-gate"

#: script -> (extra arguments, first-column entries its table must have)
SCRIPTS = {
    "train_throughput.py": (["--variants", "all"], None),
    "generation_throughput.py": (["--variants", SOME, "--new-tokens", "3"], SOME.split(",")),
    "length_scaling.py": (["--variants", SOME, "--lengths", "4,8", "--tokens", "16"], SOME.split(",")),
    "link_implementations.py": (["--variants", "al-prev-encoder,al-cum-both", "--new-tokens", "3"], None),
    "lora_cost.py": (["--variants", SOME, "--lora-r", "2"], SOME.split(",")),
}


def _load(name: str):
    """Import a benchmark module under a private name (the scripts import each other as top-level modules)."""
    spec = importlib.util.spec_from_file_location(f"_benchmarks_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_nllb_family_compares_with_vanilla_m2m100_and_names_what_it_lacks() -> None:
    """``--family m2m_100``: every variant the family defines against vanilla M2M100; a graph variant is
    refused with the reason, not dropped silently."""
    env = {**os.environ, "PYTHONPATH": str(BENCHMARKS.parents[1]), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, str(BENCHMARKS / "train_throughput.py"), *FAST, "--family", "m2m_100"]
    result = subprocess.run([*command, "--variants", "all"], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    names = [row[0] for row in _table_rows(result.stdout)]
    assert "al-prev-both-gate" in names and not any(name.startswith("graph") for name in names)
    assert "model: m2m_100" in result.stdout
    refused = subprocess.run([*command, "--variants", "graph-gate"], capture_output=True, text=True, env=env)
    assert refused.returncode != 0 and "post-LN families only" in refused.stderr


def _table_rows(stdout: str) -> list[list[str]]:
    """The body rows of the Markdown table in `stdout`, as lists of stripped cells."""
    lines = [line for line in stdout.splitlines() if line.startswith("|")]
    assert len(lines) >= 3, stdout
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_script_prints_table(script: str) -> None:
    extra, expected = SCRIPTS[script]
    env = {**os.environ, "PYTHONPATH": str(BENCHMARKS.parents[1]), "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *FAST, *extra],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "- machine:" in result.stdout and "- date:" in result.stdout
    names = [row[0] for row in _table_rows(result.stdout)]
    common = _load("common")
    if script == "train_throughput.py":
        assert names == list(common.VARIANTS)
        assert all(row[-1] in ("PASS", "MISS") for row in _table_rows(result.stdout) if row[0] != "aa")
    elif script == "link_implementations.py":
        assert names == [v for v in ("al-prev-encoder", "al-cum-both") for _ in range(3)]
    else:
        assert names == expected


def test_flop_counter_matches_torch() -> None:
    """Eager attention runs every product through matmul, so torch's counter must agree exactly."""
    common, flops = _load("common"), _load("flops")
    shape = common.SHAPES["tiny"]
    batch = common.random_batch(shape)
    src_len, tgt_len = batch["input_ids"].shape[1], batch["labels"].shape[1]
    combinations = [
        common.Variant(
            "shared-self_gate",
            "graph",
            {"graph_attention": True, "graph_shared_qkv": True, "graph_fusion": "self_gate"},
        ),
        common.Variant(
            "shared-half-sum",
            "graph",
            {"graph_attention": True, "graph_shared_qkv": True, "graph_half_dim": True, "graph_fusion": "sum"},
        ),
    ]
    for variant in (None, *common.VARIANTS.values(), *combinations):
        model = common.build_model(variant, shape, attn_implementation="eager").eval()
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            model(**batch)
        expected = flops.forward_flops(model.config, shape.batch_size, src_len, tgt_len)
        assert counter.get_total_flops() == expected, variant


def test_concat_link_counts_wider_scores() -> None:
    """The concat kernel multiplies queries and keys of two (previous) or n + 1 (cumulative) layers."""
    common, flops = _load("common"), _load("flops")
    assert flops.link_qk_factor(0, True, "previous", True) == 1
    assert flops.link_qk_factor(3, True, "previous", True) == 2
    assert flops.link_qk_factor(3, True, "cumulative", True) == 4
    assert flops.link_qk_factor(3, True, "cumulative", False) == 1
    shape = common.SHAPES["tiny"]
    variant = common.VARIANTS["al-cum-both"]
    for implementation, kernel, device, concat in [
        ("sdpa", "auto", "cpu", False),
        ("sdpa", "auto", "cuda", True),
        ("eager", "auto", "cuda", False),
        ("sdpa", "concat", "cpu", True),
        ("sdpa", "scores", "cuda", False),
    ]:
        model = common.build_model(variant, shape, attn_implementation=implementation, link_kernel=kernel)
        assert flops.link_uses_concat(model.config, device) == concat, (implementation, kernel, device)


def test_speed_flags_writes_its_ratios(tmp_path: Path) -> None:
    """speed_flags.py trains fp32 and bf16 side by side and writes the ratios the experiment report
    reads to price a converged run without the speed flags."""
    import json

    from recipe_fixtures import write_tiny_corpus

    corpus = write_tiny_corpus(tmp_path / "corpus", {"train": 64, "valid": 8})
    out = tmp_path / "speed_flags.json"
    env = {**os.environ, "PYTHONPATH": str(BENCHMARKS.parents[1]), "OMP_NUM_THREADS": "1"}
    arguments = ["--corpus", str(corpus), "--train-split", "train", "--modes", "fp32,bf16-eager", "--steps", "4"]
    arguments += ["--eval-every", "4", "--eval-samples", "4", "--vocab", "300", "--max-tokens", "200"]
    arguments += ["--profile-steps", "2", "--attention-link", "both"]
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "speed_flags.py"), *arguments, "--no-progress", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    names = [row[0] for row in _table_rows(result.stdout) if not row[0].startswith("-")]
    assert names == ["fp32", "bf16-eager", "mode", "fp32", "bf16-eager"], names  # the speeds, then the profile
    record = json.loads(out.read_text())
    # each mode ran the kernel its name says, to the end (not the last-built mode's, through a shared config)
    implementations = {name: mode["attn_implementation"] for name, mode in record["modes"].items()}
    assert implementations == {"fp32": "sdpa", "bf16-eager": "eager"}
    for shares in record["profile"].values():  # the dropout model draws masks; the shares add up to the whole
        assert shares["dropout mask draw"] > 0 and shares["matrix products"] > 0
        assert abs(sum(v for k, v in shares.items() if k != "ms_per_step") - 1) < 1e-3
    assert record["modes"]["fp32"]["speed_vs_fp32"] == 1.0
    assert record["modes"]["bf16-eager"]["speed_vs_fp32"] > 0
    assert set(record["modes"]["bf16-eager"]["valid_bleu"]) == {"4"}
    assert record["float_fingerprint"] and "--json" in record["command"]
    assert record["attention_link"] == "both" and "attention_link both" in result.stdout


def test_speed_flags_takes_a_variants_model_from_its_recipe(tmp_path: Path) -> None:
    """``--recipe`` builds the grid variant's model (its options, not its shape) and records the options."""
    import json

    from recipe_fixtures import write_tiny_corpus

    corpus = write_tiny_corpus(tmp_path / "corpus", {"train": 64, "valid": 8})
    out = tmp_path / "speed_flags.json"
    recipe = BENCHMARKS.parents[1] / "recipes" / "configs" / "bible_es_en_10k_graph_half_gate.yaml"
    env = {**os.environ, "PYTHONPATH": str(BENCHMARKS.parents[1]), "OMP_NUM_THREADS": "1"}
    arguments = ["--corpus", str(corpus), "--train-split", "train", "--modes", "fp32,bf16-eager", "--steps", "2"]
    arguments += ["--eval-every", "2", "--eval-samples", "4", "--vocab", "300", "--max-tokens", "200"]
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "speed_flags.py"), *arguments, "--recipe", str(recipe), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(out.read_text())
    assert record["options"]["graph_attention"] is True and record["options"]["graph_half_dim"] is True
    assert record["options"]["graph_fusion"] == "gate" and record["attention_link"] == "none"
    assert "graph_attention True, graph_half_dim True" in result.stdout and "3+3 layers" in result.stdout
    implementations = {name: mode["attn_implementation"] for name, mode in record["modes"].items()}
    assert implementations == {"fp32": "sdpa", "bf16-eager": "eager"}


def test_translation_speed_runs_without_ctranslate2_and_says_so(monkeypatch, capsys) -> None:
    """CTranslate2 is a benchmark-only extra: without it the table has the package's rows, and the run says
    what is missing (CI installs no CTranslate2; the stand-in below makes it absent where it is installed)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the script imports its siblings as top-level modules
    speed = _load("translation_speed")
    monkeypatch.setattr(speed, "has_ctranslate2", lambda: False)
    speed.main(["--size", "tiny", "--vocab", "64", "--steps", "1", "--warmup", "0", "--threads", "1"])
    out, err = capsys.readouterr()
    assert "CTranslate2 not installed" in err and "its rows are missing" in out
    systems = [row[2] for row in _table_rows(out)]
    for mode in ("fp32", "bf16", "int8"):
        assert f"Transformers MarianMTModel {mode}" in systems and f"linked (attention_link=both) {mode}" in systems
    assert not any(system.startswith("CTranslate2") for system in systems)
    assert {row[1] for row in _table_rows(out)} == {"beam 4", "greedy"}
    assert "torch threads 1 (each row's threads column)" in out  # the rows' counts, not the parent process's


@pytest.mark.slow
def test_translation_speed_times_an_exported_model_and_says_what_it_stores(monkeypatch, capsys) -> None:
    """``--exported fp32`` builds the linked model's packages (a real build, minutes: slow), times them beside
    the eager rows, and says how long the build and the load took and what the packages store."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    speed = _load("translation_speed")
    monkeypatch.setattr(speed, "has_ctranslate2", lambda: False)
    argv = ["--size", "tiny", "--vocab", "64", "--steps", "1", "--warmup", "0", "--threads", "1", "--beams", "1"]
    speed.main([*argv, "--dtypes", "fp32", "--exported", "fp32"])
    out = capsys.readouterr().out
    systems = [row[2] for row in _table_rows(out) if len(row) > 4]
    assert "linked (attention_link=both) fp32, exported" in systems
    stored = {row[0]: row for row in _table_rows(out) if len(row) == 4}
    assert "(weights in the model's safetensors)" in stored["linked fp32, exported"][2]
    assert float(stored["linked fp32, exported"][1]) > 0 and float(stored["linked fp32, exported"][3]) > 0


def test_translation_speed_times_compiled_decoding_with_its_compile_time_apart(monkeypatch, capsys) -> None:
    """``--compiled`` adds vanilla and the linked model with compiled decoding and says their first calls' time apart
    (compiled here with the eager backend: a smoke test need not wait for the compiler); ``--compiled int8``
    is refused when the arguments are read."""
    from hf_graphtf.translation import dtype_choice, loading

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    speed = _load("translation_speed")
    monkeypatch.setattr(speed, "has_ctranslate2", lambda: False)
    real = dtype_choice.compile_decoding
    monkeypatch.setattr(loading, "compile_decoding", lambda model: real(model, backend="eager"))
    argv = ["--size", "tiny", "--vocab", "64", "--steps", "1", "--warmup", "0", "--threads", "1"]
    speed.main([*argv, "--dtypes", "fp32,int8", "--beams", "1", "--compiled"])
    out = capsys.readouterr().out
    systems = [row[2] for row in _table_rows(out)]
    assert "linked (attention_link=both) fp32, compiled" in systems
    assert "Transformers MarianMTModel fp32, compiled" in systems  # the link against vanilla in the same mode
    assert not any("int8, compiled" in system for system in systems)
    assert "First call of each compiled system" in out
    with pytest.raises(SystemExit):  # asked for by name, int8 is refused, not left out
        speed.main([*argv, "--compiled", "int8"])
    assert "not int8 (int8 linear layers, activations scaled per row (as CTranslate2))" in capsys.readouterr().err


def test_translation_speed_runs_compiled_translation_end_to_end_with_the_cache_empty_then_filled(
    monkeypatch, capsys
) -> None:
    """``--end-to-end-only --cli-lines N --compiled bf16`` runs `translate --compile on` twice with one
    compiler cache folder, empty for the first run (the children are stood in for: the real ones compile
    for minutes)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    speed = _load("translation_speed")
    monkeypatch.setattr(speed, "has_ctranslate2", lambda: False)
    children = []

    def child(command, clock, env=None):
        children.append((command, dict(env or {})))
        output = Path(command[command.index("--output") + 1])
        output.write_text("w2 w3\n" * 4, encoding="utf-8")
        return 2.0

    monkeypatch.setattr(speed, "timed_child", child)
    argv = ["--size", "tiny", "--vocab", "64", "--threads", "1", "--cli-lines", "4", "--end-to-end-only"]
    speed.main([*argv, "--modes", "bf16", "--compiled", "bf16", "--cli-beams", "4"])
    out = capsys.readouterr().out
    assert "Transformers MarianMTModel" not in out  # no generate table
    names = [row[2] for row in _table_rows(out) if len(row) == 9]
    assert names == [
        "hf-graphtf translate, linked, --dtype bf16",
        "hf-graphtf translate, linked, --dtype bf16 --compile on, compiler cache empty",
        "hf-graphtf translate, linked, --dtype bf16 --compile on, compiler cache filled",
    ]
    (eager, _), (cold, cold_env), (warm, warm_env), (start_up, _) = children  # the start-up: not compiled
    assert "--compile" not in start_up and "one-line" in start_up[start_up.index("--input") + 1]
    assert "Start-up: the same commands on a one-line file" in out
    assert "--compile" not in eager and cold == warm and cold[cold.index("--compile") + 1] == "on"
    cache = Path(cold_env["TORCHINDUCTOR_CACHE_DIR"])
    assert cold_env == warm_env and not cache.exists()  # fresh: nothing there before the first run


def _tiny_models_and_test_split(speed, tmp_path: Path) -> dict[str, Path]:
    """translation_speed's tiny vanilla and linked models (word-level tokenizer, 64 words) and a six-pair
    test split of their words in ``tmp_path / "corpus"``, for the scripts that score a saved model."""
    import json

    shape = speed.Shape(**{**speed.SHAPES["tiny"].__dict__, "vocab": 64})
    folders = speed.write_models(shape, tmp_path, seed=0)
    pairs = [{"translation": {"es": f"w{i} w{i + 1} w{i + 2}", "en": f"w{i + 3} w{i + 4}"}} for i in range(2, 8)]
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "test.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs), encoding="utf-8")
    return folders


def test_translation_quality_scores_each_format_and_a_compiled_one_against_fp32(tmp_path, monkeypatch, capsys) -> None:
    """Each format, and with ``--compiled`` a compiled one, translates the split and gets a row against fp32
    (a tiny random model with a word-level tokenizer; compiled with the eager backend: a smoke test need
    not wait for the compiler)."""

    from hf_graphtf.translation import dtype_choice, loading

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    speed, quality = _load("translation_speed"), _load("translation_quality")
    folders = _tiny_models_and_test_split(speed, tmp_path)
    real = dtype_choice.compile_decoding
    monkeypatch.setattr(loading, "compile_decoding", lambda model: real(model, backend="eager"))
    argv = ["--model", str(folders["linked"]), "--corpus", str(tmp_path / "corpus"), "--max-new-tokens", "4"]
    quality.main([*argv, "--beam-size", "2", "--threads", "1", "--dtypes", "bf16", "--compiled", "fp32"])
    out = capsys.readouterr().out
    rows = _table_rows(out)
    assert [row[0] for row in rows] == ["fp32", "bf16", "fp32, compiled"]
    assert rows[2][2] == "+0.00"  # compiled fp32 decodes what eager fp32 decodes
    assert "a compiled format's time includes its compiling" in out
    with pytest.raises(SystemExit):
        quality.main([*argv, "--compiled", "int8"])
    assert "not int8 (int8 linear layers, activations scaled per row (as CTranslate2))" in capsys.readouterr().err


def test_ignored_rows_times_both_ways_on_the_same_packages(tmp_path, monkeypatch, capsys) -> None:
    """Each search gets a row with every row decoded to the end and one with the ignored rows left out,
    from one load (the graphs traced, not compiled: a smoke test need not wait for AOTInductor), and the
    model's own folder is left as it was."""

    from hf_graphtf.translation.export_graphs import GRAPH_NAMES, export_graphs
    from hf_graphtf.translation.exported_decoding import ExportedDecoding
    from hf_graphtf.translation.inference import load_model

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    speed, ignored = _load("translation_speed"), _load("ignored_rows")
    folders = _tiny_models_and_test_split(speed, tmp_path)
    built, switches = [], []

    def traced(folder, device, dtype, engine):
        tokenizer, model = load_model(folder, device, dtype, engine="eager")
        programs = export_graphs(model)
        model.exported_decoding = ExportedDecoding({name: programs[name].module() for name in GRAPH_NAMES})
        real = model.exported_decoding.generate
        model.exported_decoding.generate = lambda *a, **k: (
            switches.append(model.exported_decoding.leave_out_ignored_rows) or real(*a, **k)
        )
        return tokenizer, model

    monkeypatch.setattr(ignored, "export_model", lambda folder, dtype: built.append((folder, dtype)))
    monkeypatch.setattr(ignored, "load_model", traced)
    argv = ["--model", str(folders["linked"]), "--corpus", str(tmp_path / "corpus"), "--max-new-tokens", "4"]
    ignored.main([*argv, "--dtypes", "fp32", "--beam-sizes", "1,2", "--repeats", "1"])
    rows = _table_rows(capsys.readouterr().out)
    assert [row[1:3] for row in rows] == [
        ["greedy", "decoded to the end"],
        ["greedy", "left out"],
        ["beam 2", "decoded to the end"],
        ["beam 2", "left out"],
    ]
    assert rows[1][-1] == rows[3][-1] == "6 of 6"  # float32: the same translations either way
    assert built[0][1] == "fp32" and built[0][0] != folders["linked"] and not (folders["linked"] / "exported").exists()
    assert set(switches) == {False, True}


def test_int8_row_scales_scores_both_quantizations_and_counts_the_lines_a_batch_changes(
    tmp_path, monkeypatch, capsys
) -> None:
    """fp32, int8 with a scale per row and with one per batch each get a row; a scale per row changes no line
    between batches of six and of one (the tiny model's split), and fp32 equals itself."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    speed, row_scales = _load("translation_speed"), _load("int8_row_scales")
    folders = _tiny_models_and_test_split(speed, tmp_path)
    argv = ["--model", str(folders["linked"]), "--corpus", str(tmp_path / "corpus"), "--max-new-tokens", "4"]
    row_scales.main([*argv, "--beam-sizes", "1,2", "--batch-sizes", "6,1", "--repeats", "1"])
    out = capsys.readouterr().out
    rows = {(row[0], row[1]): row for row in _table_rows(out)}
    systems = ["fp32", "int8, a scale per row", "int8, a scale per batch (quantize_dynamic)"]
    assert set(rows) == {(system, search) for system in systems for search in ("greedy", "beam 2")}
    for search in ("greedy", "beam 2"):
        assert rows["fp32", search][6] == "6" and rows["fp32", search][7] == "0"
        assert rows["int8, a scale per row", search][7] == "0"
    assert "lines batches of 1 change" in out


@pytest.mark.parametrize(
    ("script", "argv", "told"),
    [
        ("translation_speed", ["--dtypes", "fp32,int4"], "int4"),
        ("translation_speed", ["--beams", "4,zero"], "'4,zero'"),
        ("translation_speed", ["--threads", "0"], "'0'"),
        ("translation_quality", ["--modes", "fp8"], "fp8"),
        ("length_scaling", ["--lengths", "16,-2"], "'16,-2'"),
        ("train_throughput", ["--tokens", "4k"], "'4k'"),
    ],
)
def test_a_bad_list_option_is_refused_by_name_before_anything_runs(script, argv, told, monkeypatch, capsys) -> None:
    """The scripts' comma-separated options share one parser each (`common.positive_ints`,
    `common.translation_formats`): a bad item stops argparse with the value named, before a model is built."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    module = _load(script)
    with pytest.raises(SystemExit) as stopped:
        module.main(argv)
    assert stopped.value.code == 2 and told in capsys.readouterr().err


def test_kernel_differences_rank_by_what_the_variant_adds_and_keep_the_rest_in_a_total(monkeypatch) -> None:
    """The GPU sweep's table of where a variant's kernel time goes: largest differences first, each as a share
    of the variant's step, the kernels left out summed in a last row (nothing dropped from the total)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the script imports its siblings as top-level modules
    throughput = _load("train_throughput")
    vanilla = {"void at::native::gemm": 0.010, "cat": 0.001, "add": 0.002}
    variant = {"void at::native::gemm": 0.0105, "cat": 0.003, "add": 0.002, "copy": 0.0001}
    rows = throughput.kernel_differences(vanilla, variant, step_seconds=0.02, top=2)
    assert [row[0] for row in rows] == ["cat", "gemm", "the other 2 kernels"]
    assert rows[0][3:] == ["+2.000", "+10.0%"]
    assert rows[-1][3] == "+0.100"


@pytest.mark.parametrize("choice, fused", [("fused", True), ("modules", False)])
def test_graph_path_forces_the_group_path_on_a_device_and_restores_the_table(choice: str, fused: bool) -> None:
    """``--graph-path`` is how the GPU command measures `FUSED_PATH_MEASURED`; the table is as before after."""
    from hf_graphtf import graph_attention

    common = _load("common")
    before = dict(graph_attention.FUSED_PATH_MEASURED)
    with common.graph_path(choice, "cuda"):
        assert graph_attention.fused_path_pays("cuda", False) is fused
        assert graph_attention.fused_path_pays("cuda", True) is fused
    assert graph_attention.FUSED_PATH_MEASURED == before
    with common.graph_path("auto", "cpu"):
        assert graph_attention.FUSED_PATH_MEASURED == before


def test_link_saves_joins_keeps_the_joins_for_the_run_and_restores_the_rule_after() -> None:
    """``--link-saves joins`` is how the GPU command measures what making the joins again in backward costs."""
    from hf_graphtf import attention_link

    common = _load("common")
    rule = attention_link.saves_halves
    with common.link_saves("joins"):
        assert attention_link.saves_halves(torch.ones(1, requires_grad=True)) is False
    assert attention_link.saves_halves is rule
    with common.link_saves("auto"):
        assert attention_link.saves_halves is rule


def test_the_benchmarks_readme_names_every_script_there():
    """recipes/benchmarks/README.md is the folder's index: each script in it has its row."""
    readme = (BENCHMARKS / "README.md").read_text(encoding="utf-8")
    scripts = sorted(path.name for pattern in ("*.py", "*.sh") for path in BENCHMARKS.glob(pattern))
    assert [name for name in scripts if f"`{name}`" not in readme] == []
