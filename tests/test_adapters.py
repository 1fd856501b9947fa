"""Adapters (PEFT's LoRA) on the package's models.

The paper's link adds no parameters, so LoRA on a linked model needs nothing of the package. What the options
add to a vanilla checkpoint, graph attention's modules and the learned link gate, is frozen by an adapter
like any other weight: the model names those modules for PEFT's ``modules_to_save``, and a model set to
train with one of them frozen says so instead of training without it.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from model_matrix import OPTION_MATRIX, source_batch, target_batch, tiny_model
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForSeq2SeqLM

from hf_graphtf.modeling_common import frozen_additions

LORA = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"], "task_type": "SEQ_2_SEQ_LM"}


def _batch() -> dict[str, torch.Tensor]:
    input_ids, attention_mask = source_batch()
    labels = target_batch()[:, 1:].contiguous()
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def _train_steps(model: torch.nn.Module, steps: int = 3) -> None:
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(trainable, lr=0.5)
    for _ in range(steps):
        model(**_batch()).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()


def _logits(model: torch.nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(**_batch()).logits


def _train_without_warnings(model: torch.nn.Module) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        model.train()


def _frozen_warnings(model: torch.nn.Module) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.train()
    return [str(w.message) for w in caught if "frozen while other parameters train" in str(w.message)]


@pytest.mark.parametrize("name", ["al-both-gate", "graph-self_gate", "graph-shared-gate"])
def test_a_frozen_addition_warns_once_when_the_model_is_set_to_train(name):
    model = tiny_model("marian", OPTION_MATRIX[name], dtype=torch.float32)
    _train_without_warnings(model)  # everything trains: nothing to say
    model.requires_grad_(False)
    _train_without_warnings(model)  # nothing trains (frozen for inference): nothing to say
    model.lm_head.requires_grad_(True)
    learned_gate = OPTION_MATRIX[name].get("attention_link_gate") == "learned"
    expected = "layers.1.self_attn.link_gate" if learned_gate else "layers.1.low_proj"
    (message,) = _frozen_warnings(model)  # the outermost model warns, its sub-models do not
    assert expected in message and "modules_to_save" in message
    assert message.startswith(f"{len(frozen_additions(model))} parts this model adds")
    assert _frozen_warnings(model) == []  # once


def test_added_module_names_are_what_a_vanilla_checkpoint_lacks():
    """Every weight a vanilla checkpoint has no tensor for (a new key, or half-dim's new shape) lies in one of
    the named modules, and every named module holds such weights; the learned gate is a parameter, not one."""
    vanilla = {key: tensor.shape for key, tensor in tiny_model("marian", {}, dtype=torch.float32).state_dict().items()}
    for name, options in OPTION_MATRIX.items():
        model = tiny_model("marian", options, dtype=torch.float32)
        state = model.state_dict()
        added = {key for key, tensor in state.items() if vanilla.get(key) != tensor.shape}
        modules = set(model.added_module_names())
        gates = {key for key in added if key.endswith(".link_gate")}
        assert bool(gates) == (options.get("attention_link_gate") == "learned"), name
        owners = {next((m for m in modules if key.startswith(f"{m}.")), None) for key in added - gates}
        assert owners == modules, (name, sorted(added), sorted(modules))
        if options.get("graph_attention"):  # layers 1..N-1 of the encoder, none of the decoder
            assert {m.split(".")[3] for m in modules} == {"1", "2"} and all(".encoder." in m for m in modules)


def test_lora_on_the_papers_link_trains_and_decodes_the_same_with_the_cache(family):
    model = tiny_model(family, OPTION_MATRIX["al-both"], dtype=torch.float32)
    peft_model = get_peft_model(model, LoraConfig(**LORA))
    _train_without_warnings(peft_model)  # the paper's link adds nothing to leave frozen
    before = _logits(peft_model)
    _train_steps(peft_model)
    assert not torch.allclose(_logits(peft_model), before)  # the adapters trained
    input_ids, attention_mask = source_batch()
    decode = {"input_ids": input_ids, "attention_mask": attention_mask, "max_new_tokens": 6, "num_beams": 2}
    cached = peft_model.generate(**decode, use_cache=True)
    uncached = peft_model.generate(**decode, use_cache=False)
    assert torch.equal(cached, uncached)


def test_lora_with_the_learned_gate_warns_until_the_gates_train_and_the_merged_model_keeps_them(family, tmp_path):
    model = tiny_model(family, OPTION_MATRIX["al-both-gate"], dtype=torch.float32)
    peft_model = get_peft_model(model, LoraConfig(**LORA))
    (message,) = _frozen_warnings(peft_model)  # a frozen zero gate: the link would stay off
    assert "link_gate" in message
    for name, parameter in peft_model.named_parameters():
        if name.endswith("link_gate"):
            parameter.requires_grad_(True)  # the remedy the warning names
    assert frozen_additions(peft_model) == []
    _train_steps(peft_model)
    gates = {name: p.detach().clone() for name, p in peft_model.named_parameters() if name.endswith("link_gate")}
    assert gates and all(gate.abs().sum() > 0 for gate in gates.values())  # trained away from zero
    expected = _logits(peft_model)
    peft_model.merge_and_unload().save_pretrained(tmp_path)  # the gates travel in the merged model
    reloaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    torch.testing.assert_close(_logits(reloaded), expected, rtol=1e-5, atol=1e-5)


def test_lora_with_graph_attention_trains_the_added_modules_and_the_adapter_round_trips(graph_family, tmp_path):
    base = tiny_model(graph_family, OPTION_MATRIX["graph-self_gate"], dtype=torch.float32)
    base.save_pretrained(tmp_path / "base")
    names = base.added_module_names()
    assert {name.rsplit(".", 1)[1] for name in names} == {"low_proj", "mid_attn_inc", "mid_attn_prev", "self_gate"}
    without = get_peft_model(tiny_model(graph_family, OPTION_MATRIX["graph-self_gate"]).float(), LoraConfig(**LORA))
    assert _frozen_warnings(without)  # left at their initialisation otherwise
    peft_model = get_peft_model(base, LoraConfig(**LORA, modules_to_save=names))
    _train_without_warnings(peft_model)
    lora_inside = [n for n, p in peft_model.named_parameters() if "lora_" in n and any(m in n for m in names)]
    assert lora_inside == []  # the added modules train whole, not through adapters on random weights
    initial = {n: p.detach().clone() for n, p in peft_model.named_parameters() if "modules_to_save" in n}
    _train_steps(peft_model)
    trained = dict(peft_model.named_parameters())
    assert initial and all(not torch.equal(trained[n], p) for n, p in initial.items() if n.endswith("weight"))
    expected = _logits(peft_model)
    peft_model.save_pretrained(tmp_path / "adapter")
    fresh = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "base", dtype=torch.float32)
    loaded = PeftModel.from_pretrained(fresh, tmp_path / "adapter").eval()
    torch.testing.assert_close(_logits(loaded), expected, rtol=1e-5, atol=1e-5)  # (the kernels may differ)
    base_logits = _logits(AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "base", dtype=torch.float32).eval())
    assert (base_logits - expected).abs().max() > 1e-3  # the adapter and the trained modules came with it
