"""What a fine-tune trains is what it saves: after loading, every parameter that needs a gradient is one the
checkpoint holds, and a model trained after loading reloads with its own logits (to float64 rounding).

Marian's position tables are computed, never saved; Transformers built them frozen but handed them back
trainable after `from_pretrained` (`transformers_seam.keep_computed_positions_frozen`), so an optimizer trained
them and the saved model was not the one evaluated. The routes a user loads by: the package's class (Auto
classes), a vanilla checkpoint converted by the package (`load_pretrained_with_options`), and remote code
without the package (`trust_remote_code`).
"""

from __future__ import annotations

import json

import pytest
import torch
from model_matrix import OPTION_MATRIX, source_batch, target_batch, tiny_config, tiny_model
from recipe_fixtures import BLOCK_PACKAGE, run_python
from safetensors import safe_open
from transformers import AutoModelForSeq2SeqLM, MarianConfig, MarianMTModel

from hf_graphtf.configuration import GRAPH_OPTION_DEFAULTS
from hf_graphtf.families import FAMILIES
from hf_graphtf.self_check.matrix import supports
from hf_graphtf.training.models import freeze_unsaved_parameters
from hf_graphtf.training.pretrained import load_pretrained_with_options
from hf_graphtf.transformers_seam import unsaved_trainable_parameters

#: the learned link gate (a parameter of the package's own) and graph attention with a linked decoder
OPTIONS = ["al-both-gate", "graph-gate+al-dec-cum"]
ROUTES = ["package", "converted"]
#: Equal to float64 rounding. Bit-equality is not what the CPU's matrix kernels promise: the same weights held at
#: another address can round a product's last bit differently (a converted model, loaded in float32 and cast,
#: differs from its reload by 2e-16 at the first projection, trained or not). The trained tables moved logits
#: by 1e-2.
SAME = {"rtol": 0.0, "atol": 1e-12}


def _inputs() -> dict[str, torch.Tensor]:
    input_ids, attention_mask = source_batch()
    return dict(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=target_batch())


def _vanilla_checkpoint(family: str, folder) -> None:
    """The family's Transformers model at the tiny shape, saved: what a user's opus-mt, BART or NLLB is."""
    spec = FAMILIES[family]
    known = spec.vanilla_config_class().to_dict()
    settings = {key: value for key, value in tiny_config(family).to_dict().items() if key in known}
    settings.pop("model_type", None)
    torch.manual_seed(0)
    spec.vanilla_seq2seq_class(spec.vanilla_config_class(**settings)).save_pretrained(folder)


def _loaded(family: str, options: str, route: str, tmp_path):
    """A model as the route loads it, in float64, ready to train."""
    if route == "package":
        tiny_model(family, OPTION_MATRIX[options]).save_pretrained(tmp_path / "checkpoint")
        model = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "checkpoint", attn_implementation="eager")
    else:
        _vanilla_checkpoint(family, tmp_path / "vanilla")
        requested = {**GRAPH_OPTION_DEFAULTS, **OPTION_MATRIX[options]}
        _, model = load_pretrained_with_options(str(tmp_path / "vanilla"), requested, "eager")
    return model.to(torch.float64)


def _saved_keys(model, folder) -> set[str]:
    model.save_pretrained(folder)
    with safe_open(str(folder / "model.safetensors"), framework="pt") as saved:
        return set(saved.keys())


def _train(model, steps: int = 3) -> None:
    """A few AdamW steps at a high rate, so that anything trainable moves visibly.

    Gradients are zeroed, not freed, between steps, as ``zero_grad(set_to_none=False)`` leaves them: Marian's
    table gets no gradient (its forward runs without autograd), but a zero one lets weight decay move it, which
    is how a trainable table drifts from the one a reload computes."""
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2, weight_decay=0.1)
    inputs = _inputs()
    for _ in range(steps):
        model(**inputs, labels=inputs["decoder_input_ids"]).loss.backward()
        for parameter in optimizer.param_groups[0]["params"]:
            if parameter.grad is None:
                parameter.grad = torch.zeros_like(parameter)
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
    model.eval()


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("options", OPTIONS)
def test_after_loading_every_trainable_parameter_is_one_the_checkpoint_holds(family, options, route, tmp_path):
    model = _loaded(family, options, route, tmp_path)
    trainable = {name for name, parameter in model.named_parameters() if parameter.requires_grad}
    tied = set(getattr(model, "all_tied_weights_keys", {}) or {})
    assert trainable - _saved_keys(model, tmp_path / "saved") - tied == set()
    assert unsaved_trainable_parameters(model) == []
    if family == "marian":  # the tables are there, computed and frozen, as in a model built fresh
        for stack in (model.model.encoder, model.model.decoder):
            assert not stack.embed_positions.weight.requires_grad


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("options", OPTIONS)
def test_a_model_trained_after_loading_reloads_with_its_own_logits(family, options, route, tmp_path):
    model = _loaded(family, options, route, tmp_path)
    with torch.no_grad():
        before = model.eval()(**_inputs()).logits
    _train(model)
    with torch.no_grad():
        trained = model(**_inputs()).logits
    assert (trained - before).abs().max() > 1e-2  # it did train
    model.save_pretrained(tmp_path / "trained")
    reloaded = AutoModelForSeq2SeqLM.from_pretrained(
        tmp_path / "trained", dtype=torch.float64, attn_implementation="eager"
    ).eval()
    with torch.no_grad():
        torch.testing.assert_close(reloaded(**_inputs()).logits, trained, **SAME)


def test_resizing_the_embeddings_after_loading_keeps_the_computed_positions_frozen(tmp_path):
    model = _loaded("marian", "al-both-gate", "package", tmp_path)
    model.resize_token_embeddings(model.config.vocab_size + 8, mean_resizing=False)
    assert unsaved_trainable_parameters(model) == []
    assert not model.model.encoder.embed_positions.weight.requires_grad


REMOTE_TRAIN_SCRIPT = (
    BLOCK_PACKAGE
    + """
import json
import torch
from safetensors import safe_open
from transformers import AutoModelForSeq2SeqLM

checkpoint, inputs_file, out_folder, report = sys.argv[1:5]
load = dict(trust_remote_code=True, dtype=torch.float64, attn_implementation="eager")
model = AutoModelForSeq2SeqLM.from_pretrained(checkpoint, **load)
assert "hf_graphtf" not in sys.modules and type(model).__module__.startswith("transformers_modules")
trainable = {name for name, parameter in model.named_parameters() if parameter.requires_grad}
inputs = torch.load(inputs_file)
model.train()
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2, weight_decay=0.1)
for _ in range(3):
    model(**inputs, labels=inputs["decoder_input_ids"]).loss.backward()
    for parameter in optimizer.param_groups[0]["params"]:
        if parameter.grad is None:
            parameter.grad = torch.zeros_like(parameter)
    optimizer.step()
    optimizer.zero_grad(set_to_none=False)
with torch.no_grad():
    trained = model.eval()(**inputs).logits
model.save_pretrained(out_folder)
with safe_open(out_folder + "/model.safetensors", framework="pt") as saved:
    unsaved = sorted(trainable - set(saved.keys()) - set(getattr(model, "all_tied_weights_keys", {}) or {}))
reloaded = AutoModelForSeq2SeqLM.from_pretrained(out_folder, **load).eval()
with torch.no_grad():
    equal = torch.allclose(reloaded(**inputs).logits, trained, rtol=0.0, atol=1e-12)
json.dump({"unsaved": unsaved, "equal": equal}, open(report, "w"))
"""
)


def test_through_remote_code_without_the_package_a_trained_model_reloads_as_trained(family, tmp_path):
    options = "graph-gate+al-dec-cum" if supports(family, OPTION_MATRIX["graph-gate+al-dec-cum"]) else "al-both-gate"
    tiny_model(family, OPTION_MATRIX[options]).save_pretrained(tmp_path / "checkpoint")
    torch.save(_inputs(), tmp_path / "inputs.pt")
    arguments = [str(tmp_path / name) for name in ("checkpoint", "inputs.pt", "trained", "report.json")]
    result = run_python("-c", REMOTE_TRAIN_SCRIPT, *arguments, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((tmp_path / "report.json").read_text()) == {"unsaved": [], "equal": True}


def test_the_training_start_freezes_what_saving_would_drop_and_says_so_in_one_line(tmp_path):
    """Transformers' own `MarianMTModel` still comes back with trainable tables: the recipe's check, which
    reads what saving drops whatever the cause, catches it."""
    config = MarianConfig(**{k: v for k, v in tiny_config("marian").to_dict().items() if k in MarianConfig().to_dict()})
    MarianMTModel(config).save_pretrained(tmp_path)
    model = MarianMTModel.from_pretrained(tmp_path)
    names = ["model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight"]
    assert unsaved_trainable_parameters(model) == names
    line = freeze_unsaved_parameters(model)
    assert line is not None and "\n" not in line and all(name in line for name in names)
    assert unsaved_trainable_parameters(model) == [] and freeze_unsaved_parameters(model) is None


def test_lora_with_modules_to_save_after_loading_trains_only_what_its_adapter_holds(graph_family, tmp_path):
    """PEFT freezes every base weight and saves the adapters and ``modules_to_save``: the adapter, put on a
    fresh load of the checkpoint, gives the trained logits."""
    from peft import LoraConfig, PeftModel, get_peft_model

    tiny_model(graph_family, OPTION_MATRIX["graph-gate+al-dec-cum"]).save_pretrained(tmp_path / "base")
    base = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "base", dtype=torch.float64, attn_implementation="eager")
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], modules_to_save=base.added_module_names())
    model = get_peft_model(base, lora)
    assert unsaved_trainable_parameters(model) == []
    _train(model)
    with torch.no_grad():
        trained = model(**_inputs()).logits
    model.save_pretrained(tmp_path / "adapter")
    fresh = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "base", dtype=torch.float64, attn_implementation="eager")
    reloaded = PeftModel.from_pretrained(fresh, tmp_path / "adapter").eval()
    with torch.no_grad():
        torch.testing.assert_close(reloaded(**_inputs()).logits, trained, **SAME)


def test_the_recipe_loads_a_checkpoint_to_fine_tune_or_resume_with_nothing_trainable_left_unsaved(tmp_path):
    """The recipe's model for a fine-tune, and for a resumed one, which rebuilds it before the Trainer loads the
    checkpoint's weights into it: `build_model` from a saved vanilla Marian."""
    from hf_graphtf.training.arguments import DataArguments, ModelArguments, TranslationTrainingArguments
    from hf_graphtf.training.models import build_model

    _vanilla_checkpoint("marian", tmp_path / "vanilla")
    model_args = ModelArguments(
        model_name_or_path=str(tmp_path / "vanilla"), attention_link="both", attn_implementation="eager"
    )
    training_args = TranslationTrainingArguments(output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none")

    class Tokenizer:
        def __len__(self) -> int:
            return tiny_config("marian").vocab_size

    model = build_model(model_args, DataArguments(corpus=str(tmp_path)), training_args, Tokenizer())
    assert model.config.attention_link == "both"
    assert unsaved_trainable_parameters(model) == []
