"""LoRA in the training recipe (``lora_r``): what trains, what each checkpoint holds, what the run leaves.

A vanilla stand-in of a Hub checkpoint is fine-tuned with LoRA and the options on. Everything the vanilla
model had stays frozen except the adapted projections, whose merged weights move; the learned link gate
and graph attention's modules train whole. The saved model is the merged one, scored as the run scored it,
and the gates travel with each checkpoint's adapter: a resumed run starts from the gates it saved, and the
best-checkpoint reload takes that checkpoint's.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from recipe_fixtures import (
    LANGUAGE_CODES,
    REPO_ROOT,
    TRAIN_SCRIPT,
    one_thread,  # noqa: F401  (autouse fixture)
    subprocess_env,
    tiny_recipe,
    write_opus_mt_stand_in,
    write_recipe,
)
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM, TrainerCallback

from hf_graphtf.families import FAMILIES
from hf_graphtf.training import parse_recipe_args, run_translation
from hf_graphtf.training.adapters import EXTRA_PARAMETERS_FILE

pytest.importorskip("peft")

OPTIONS = {
    "al-both-learned-gate": {"attention_link": "both", "attention_link_gate": "learned"},
    "graph-gate": {"graph_attention": True, "graph_fusion": "gate"},
}
LORA = {"lora_r": 4, "lora_alpha": 8, "lora_target_modules": ["q_proj", "v_proj"]}


@pytest.fixture(scope="module")
def marian(corpus, tmp_path_factory):
    return write_opus_mt_stand_in(tmp_path_factory.mktemp("marian") / "vanilla", corpus, "marian")


def _recipe(corpus, folder, out, family="marian", options=OPTIONS["al-both-learned-gate"], **overrides):
    return tiny_recipe(
        corpus, out, model_name_or_path=str(folder), **{"attention_link": "none", **options},
        **LANGUAGE_CODES.get(family, {}), **{**LORA, **overrides},
    )  # fmt: skip


def _run(tmp_path, recipe, name="recipe.yaml", callbacks=()):
    return run_translation(*parse_recipe_args([str(write_recipe(tmp_path / name, recipe))]), callbacks=callbacks)


def _gates(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: tensor for name, tensor in state.items() if name.endswith("link_gate")}


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_lora_trains_the_adapted_projections_and_what_the_options_add_and_saves_the_merged_model(
    stand_in, corpus, name, tmp_path
):
    family, folder = stand_in
    if OPTIONS[name].get("graph_attention") and not FAMILIES[family].supports_graph_attention:
        pytest.skip(f"graph-group attention is not defined for {family} (pre-LN); its refusal is tested")
    out = tmp_path / "out"
    recipe = _recipe(
        corpus, folder, out, family, OPTIONS[name], max_steps=3, eval_steps=3, save_steps=3, load_best_model_at_end=True
    )
    results = _run(tmp_path, recipe)
    lora = results["model"]["lora"]
    assert {key: lora[key] for key in ("r", "lora_alpha", "target_modules")} == {
        "r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]
    }  # fmt: skip
    assert 0 < lora["trainable_parameters"] < results["model"]["parameters"] / 2
    assert not (out / "adapter_config.json").exists()  # the output folder is the merged model, nothing to attach
    card = (out / "README.md").read_text(encoding="utf-8")
    assert f"with LoRA adapters (rank 4 on `q_proj`, `v_proj`; {lora['trainable_parameters']:,} parameters" in card
    checkpoint = out / "checkpoint-3"
    assert (checkpoint / "adapter_model.safetensors").is_file() and (checkpoint / "config.json").is_file()
    assert not (checkpoint / "model.safetensors").exists()  # a checkpoint is the adapter, not the whole model

    vanilla = AutoModelForSeq2SeqLM.from_pretrained(folder).state_dict()
    merged = AutoModelForSeq2SeqLM.from_pretrained(out).state_dict()
    adapted = [key for key in vanilla if key.endswith(("q_proj.weight", "v_proj.weight"))]
    assert adapted and all(not torch.equal(merged[key], vanilla[key]) for key in adapted)  # the adapter, merged
    graph_modules = ("mid_attn", "low_proj", "self_gate")  # what graph attention adds: trains whole
    frozen = [key for key in vanilla if key not in adapted and not any(part in key for part in graph_modules)]
    changed = [key for key in frozen if not torch.equal(merged[key], vanilla[key])]
    assert not changed, changed  # every other pretrained weight as it was
    if OPTIONS[name].get("attention_link_gate") == "learned":
        gates = _gates(merged)
        assert gates and all(gate.abs().sum() > 0 for gate in gates.values())  # trained away from zero
        saved = load_file(checkpoint / EXTRA_PARAMETERS_FILE)
        assert saved.keys() == gates.keys()
    else:
        new = [key for key in merged if key not in vanilla]
        assert new and not (checkpoint / EXTRA_PARAMETERS_FILE).exists()
        # graph attention's modules trained whole (saved with the adapter), and the merged model holds them
        whole = {
            k.removeprefix("base_model.model."): w
            for k, w in load_file(checkpoint / "adapter_model.safetensors").items()
        }
        whole = {key: weight for key, weight in whole.items() if "lora_" not in key}
        assert set(whole) == set(new) and all(torch.equal(merged[key], whole[key]) for key in new)

    # evaluated again, from the merged model and, when only the checkpoints are left, from the best adapter
    again = _run(tmp_path, recipe)
    assert again["test"]["bleu"] == results["test"]["bleu"] and again["test"]["chrf"] == results["test"]["chrf"]
    (out / "model.safetensors").unlink()
    scored = ScoredModel()
    from_checkpoint = _run(tmp_path, recipe, callbacks=[scored])
    assert scored.state.keys() == merged.keys()
    assert all(torch.equal(scored.state[key], merged[key]) for key in merged)  # the same model, merged again
    assert from_checkpoint["test"]["chrf"] == results["test"]["chrf"]


class ScoredModel(TrainerCallback):
    """Keeps the weights of the model the test split was scored with."""

    state: dict[str, torch.Tensor] | None = None

    def on_predict(self, args, state, control, model=None, **kwargs):
        self.state = {key: tensor.detach().clone() for key, tensor in model.state_dict().items()}


def test_a_resumed_run_and_the_best_checkpoint_reload_take_the_gates_saved_with_the_adapter(marian, corpus, tmp_path):
    out = tmp_path / "out"

    class GatesAtStart(TrainerCallback):
        gates: dict[str, torch.Tensor] | None = None

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            self.gates = {name: p.detach().clone() for name, p in model.named_parameters() if "link_gate" in name}

    common = {"eval_steps": 1, "save_steps": 1, "save_total_limit": 10, "load_best_model_at_end": True}
    _run(tmp_path, _recipe(corpus, marian, out, max_steps=2, **common))
    saved = load_file(out / "checkpoint-2" / EXTRA_PARAMETERS_FILE)
    assert all(gate.abs().sum() > 0 for gate in saved.values())
    start = GatesAtStart()
    results = _run(tmp_path, _recipe(corpus, marian, out, max_steps=4, **common), "resume.yaml", callbacks=[start])
    assert results["train"]["resumed_from_checkpoint"].endswith("checkpoint-2")
    assert {name.removeprefix("base_model.model."): gate for name, gate in start.gates.items()}.keys() == saved.keys()
    for name, gate in start.gates.items():
        assert torch.equal(gate, saved[name.removeprefix("base_model.model.")]), name  # not restarted at zero

    best = results["train"]["best_checkpoint"]
    state = json.loads((out / "checkpoint-4" / "trainer_state.json").read_text())
    assert best == state["best_model_checkpoint"]
    best_gates = load_file(f"{best}/{EXTRA_PARAMETERS_FILE}")
    merged = _gates(AutoModelForSeq2SeqLM.from_pretrained(out).state_dict())
    assert merged.keys() == best_gates.keys()
    assert all(torch.equal(merged[name], best_gates[name]) for name in merged)


def test_lora_settings_are_checked_before_any_data_work_and_on_resume(marian, corpus, tmp_path, monkeypatch):
    fresh = tiny_recipe(corpus, tmp_path / "fresh", **LORA)
    with pytest.raises(ValueError, match="LoRA adapts the weights of a trained model"):
        parse_recipe_args([str(write_recipe(tmp_path / "fresh.yaml", fresh))])
    for field, value, message in [
        ("lora_r", -1, "lora_r must be"),
        ("lora_alpha", 0, "lora_alpha must be positive"),
        ("lora_dropout", 1.0, "lora_dropout must be"),
    ]:
        recipe = _recipe(corpus, marian, tmp_path / "bad", **{field: value})
        with pytest.raises(ValueError, match=message):
            parse_recipe_args([str(write_recipe(tmp_path / "bad.yaml", recipe))])
    recipe = _recipe(corpus, marian, tmp_path / "bad", lora_target_modules=["query"])
    with pytest.raises(ValueError, match=r"do not name layers of this model .*Its linear layers: .*q_proj"):
        _run(tmp_path, recipe, "bad.yaml")

    out = tmp_path / "out"
    _run(tmp_path, _recipe(corpus, marian, out, max_steps=1, save_steps=1, do_eval=False, do_predict=False))
    for changed, message in [
        ({"lora_r": 8}, r"LoRA \(checkpoint r 4, .*recipe r 8"),
        ({"lora_r": 0}, r"LoRA \(checkpoint r 4, .*recipe none: every weight trains\)"),
    ]:
        with pytest.raises(ValueError, match=message):
            _run(tmp_path, _recipe(corpus, marian, out, max_steps=2, **changed), "changed.yaml")

    from hf_graphtf.training import arguments

    real = arguments.importlib.util.find_spec
    monkeypatch.setattr(arguments.importlib.util, "find_spec", lambda name: None if name == "peft" else real(name))
    # what the message installs (no tomllib: the lowest leg runs Python 3.10)
    assert re.search(r'^lora = \["peft>=', (REPO_ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    with pytest.raises(ValueError, match=r"lora_r needs PEFT, which is not installed: pip install 'hf_graphtf\[lora\]"):
        parse_recipe_args([str(write_recipe(tmp_path / "nopeft.yaml", _recipe(corpus, marian, tmp_path / "x")))])


def test_two_process_lora_run_reloads_the_best_adapter_and_gates_in_every_process(marian, corpus, tmp_path):
    """Data-parallel LoRA on CPU through `accelerate launch`: the best checkpoint (not the last) is reloaded with
    its gates by both processes, each translating its share of the test split with the merged model."""
    recipe = _recipe(
        corpus, marian, tmp_path / "out", max_steps=4, eval_steps=1, save_steps=1, save_total_limit=10,
        load_best_model_at_end=True, metric_for_best_model="loss", greater_is_better=True,  # best is not last
    )  # fmt: skip
    recipe = write_recipe(tmp_path / "recipe.yaml", recipe)
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    command = [accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"]
    command += ["--main_process_port", str(_free_port())]  # a training run beside the tests may hold the default
    command += ["--mixed_precision", "no", "--dynamo_backend", "no", str(TRAIN_SCRIPT), str(recipe)]
    result = subprocess.run(command, capture_output=True, text=True, env=subprocess_env(), cwd=REPO_ROOT, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["train"]["distributed_type"] == "MULTI_CPU" and results["train"]["global_step"] == 4
    best = results["train"]["best_checkpoint"]
    assert not best.endswith("checkpoint-4") and "bleu" in results["test"]
    merged = _gates(AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "out").state_dict())
    best_gates = load_file(f"{best}/{EXTRA_PARAMETERS_FILE}")
    assert merged.keys() == best_gates.keys() and all(torch.equal(merged[k], best_gates[k]) for k in merged)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_lora_with_learned_gates_is_refused_where_the_engine_shards_them(marian, corpus, tmp_path):
    """FSDP and DeepSpeed shard parameters: the gates, saved and loaded beside each adapter from the parameters
    one process holds, are refused there (they run on GPUs only, so the check is called as the recipe calls it)."""
    from hf_graphtf.training.adapters import add_lora, check_adapter_engine
    from hf_graphtf.training.pretrained import load_pretrained_with_options

    for name, refused in [("al-both-learned-gate", True), ("graph-gate", False)]:
        recipe = _recipe(corpus, marian, tmp_path / "out", options=OPTIONS[name])
        model_args = parse_recipe_args([str(write_recipe(tmp_path / f"{name}.yaml", recipe))])[0]
        _, model = load_pretrained_with_options(str(marian), model_args.graph_options())
        adapted = add_lora(model, model_args)
        check_adapter_engine(adapted, "MULTI_CPU")  # DDP: each process holds every gate
        for engine in ("FSDP", "DEEPSPEED"):
            if refused:
                with pytest.raises(ValueError, match=f"not supported under {engine}"):
                    check_adapter_engine(adapted, engine)
            else:
                check_adapter_engine(adapted, engine)


def test_a_checkpoint_that_lost_its_gates_is_skipped_naming_them(marian, corpus, tmp_path, caplog):
    """A LoRA checkpoint whose model has learned gates is whole only with them (written with the adapter, renamed
    into place together): one damaged afterwards is passed over for the one before, and the run says why."""
    out = tmp_path / "out"
    common = {"save_steps": 1, "save_total_limit": 10, "do_eval": False, "do_predict": False, "eval_strategy": "no"}
    _run(tmp_path, _recipe(corpus, marian, out, max_steps=2, **common))
    (out / "checkpoint-2" / EXTRA_PARAMETERS_FILE).unlink()
    with caplog.at_level("WARNING"):
        results = _run(tmp_path, _recipe(corpus, marian, out, max_steps=3, **common), "resume.yaml")
    assert results["train"]["resumed_from_checkpoint"].endswith("checkpoint-1")
    assert f"checkpoint-2: no {EXTRA_PARAMETERS_FILE} (the learned link gates)" in caplog.text


def test_lora_trains_under_activation_checkpointing(marian, corpus, tmp_path):
    """Checkpointed layers recompute their forward in the backward: the adapters and the gates inside them
    still get their gradients (PEFT prepares a model for this only if it checkpoints when wrapped; the
    Trainer switches checkpointing on later)."""
    from transformers import Seq2SeqTrainingArguments

    fields = Seq2SeqTrainingArguments.__dataclass_fields__
    flag = "activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"  # 5.17
    out = tmp_path / "out"
    common = {"max_steps": 3, "save_steps": 3, "do_eval": False, "do_predict": False, "eval_strategy": "no"}

    class Checkpointing(TrainerCallback):
        layers: list[bool] = []

        def on_step_begin(self, args, state, control, model=None, **kwargs):
            self.layers = [m.gradient_checkpointing for m in model.modules() if hasattr(m, "gradient_checkpointing")]

    seen = Checkpointing()
    _run(tmp_path, _recipe(corpus, marian, out, **{flag: True}, **common), callbacks=[seen])
    assert seen.layers and all(seen.layers)  # every layer stack checkpoints while it trains
    vanilla = AutoModelForSeq2SeqLM.from_pretrained(marian).state_dict()
    merged = AutoModelForSeq2SeqLM.from_pretrained(out).state_dict()
    adapted = [key for key in vanilla if key.endswith(("q_proj.weight", "v_proj.weight"))]
    assert adapted and all(not torch.equal(merged[key], vanilla[key]) for key in adapted)
    gates = _gates(merged)
    assert gates and all(gate.abs().sum() > 0 for gate in gates.values())
