"""The model a recipe asks for: a fresh one of its family and options, or a saved one with the options on."""

from __future__ import annotations

from transformers import (
    AutoModelForSeq2SeqLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from ..families import FAMILIES
from ..transformers_seam import unsaved_trainable_parameters
from .arguments import DataArguments, ModelArguments, TranslationTrainingArguments
from .pretrained import load_pretrained_with_options


def build_model(
    model_args: ModelArguments,
    data_args: DataArguments,
    training_args: TranslationTrainingArguments,
    tokenizer: PreTrainedTokenizerBase,
) -> PreTrainedModel:
    """A fresh model of the chosen family and options, or the saved one named by ``model_name_or_path``
    with the options switched on (see `load_pretrained_with_options`; its family is the checkpoint's).

    Special tokens of a fresh model come from the tokenizer, placed by the family's conventions (the
    family table: Marian's decoder starts from the pad token, BART's and M2M100's from EOS). The generation
    settings used for evaluation are stored in the model's generation config, so the saved model
    translates the same way by default.
    """
    if model_args.model_name_or_path is not None:
        _, model = load_pretrained_with_options(
            model_args.model_name_or_path, model_args.graph_options(), model_args.attn_implementation
        )
        if len(tokenizer) > model.config.vocab_size:
            raise ValueError(
                f"the tokenizer has {len(tokenizer)} tokens but {model_args.model_name_or_path} has "
                f"{model.config.vocab_size} embeddings: use the checkpoint's own tokenizer."
            )
    else:
        family = FAMILIES[model_args.model_family]
        config = model_args.fresh_config(
            vocab_size=len(tokenizer),
            **family.special_token_ids(
                pad=tokenizer.pad_token_id, eos=tokenizer.eos_token_id, bos=tokenizer.bos_token_id
            ),
            forced_eos_token_id=tokenizer.eos_token_id,
        )
        model = AutoModelForSeq2SeqLM.from_config(config, attn_implementation=model_args.attn_implementation)
    generation = model.generation_config
    generation.max_length = training_args.generation_max_length or data_args.max_target_length
    # the saved model translates like the test evaluation did
    # (Transformers 5 leaves generation defaults unset: a recipe that names no beam size decodes greedily)
    beams = training_args.test_num_beams or training_args.generation_num_beams or generation.num_beams or 1
    generation.num_beams = beams
    if model_args.model_name_or_path is None and generation.num_beams > 1:
        # Beam search ends once num_beams hypotheses are finished, as in fairseq and Marian: an
        # undertrained model's runaway beams otherwise run on to max_length and dominate decoding time.
        generation.early_stopping = True
    return model


def freeze_unsaved_parameters(model: PreTrainedModel) -> str | None:
    """Freeze the parameters that need a gradient but that `save_pretrained` would not write, whatever made them
    trainable, and say so in one line (None when there are none): a run trains only what its checkpoints hold,
    so the model it evaluates is the model it saves. The package's own classes keep the one known cause away
    (`transformers_seam.keep_computed_positions_frozen`); this catches a model from elsewhere, such as
    Transformers' own Marian class."""
    names = unsaved_trainable_parameters(model)
    if not names:
        return None
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    parameters = dict(base.named_parameters())
    for name in names:
        parameters[name].requires_grad_(False)
    return (
        f"froze {len(names)} parameter(s) that saving leaves out ({', '.join(names)}): trained, they would make "
        "the evaluated model differ from the saved one"
    )
