"""Command-line and recipe arguments for training a translation model.

Three dataclasses, parsed together by `HfArgumentParser` as in the Transformers examples: what to
build (`ModelArguments`), what to train and evaluate on (`DataArguments`), and how to train
(`TranslationTrainingArguments`, which is `Seq2SeqTrainingArguments` plus early stopping). A recipe
is one YAML file holding any of their fields; flags given after it on the command line override it.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, make_dataclass
from typing import Any

import yaml
from transformers import HfArgumentParser, PretrainedConfig, Seq2SeqTrainingArguments

from ..configuration import GRAPH_OPTIONS, POSITIVE_SIZE_FIELDS, RATE_FIELDS, GraphOption
from ..families import FAMILIES
from .precision import resolve_attention, resolve_precision

MODEL_FAMILIES = tuple(FAMILIES)
#: LoRA's default targets: the query, key, value and output projections of every attention (PEFT's names for
#: the Marian, BART and M2M100 layers alike)
LORA_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "out_proj")
RECIPE_SUFFIXES = (".yaml", ".yml")


def _option_help(option: GraphOption) -> str:
    allowed = "true or false" if option.choices is None else "one of " + ", ".join(option.choices)
    return f"{option.help} ({allowed}; default {option.default})"


GraphOptionArguments = make_dataclass(
    "GraphOptionArguments",
    [
        (option.name, option.annotation, field(default=option.default, metadata={"help": _option_help(option)}))
        for option in GRAPH_OPTIONS
    ],
)
GraphOptionArguments.__doc__ = "The graph and link options as arguments, made from `configuration.GRAPH_OPTIONS`."


@dataclass
class ModelArguments(GraphOptionArguments):
    """The model to train: its family, its size and the attention-link / graph options.

    The size fields use the names of `MarianConfig` / `BartConfig` so a recipe reads like a config.
    They are ignored when `model_name_or_path` starts from a saved model, whose family and sizes are kept;
    the link and graph options are then switched on in the loaded model (see `training.pretrained`).
    """

    model_family: str = field(default="marian", metadata={"help": f"One of {MODEL_FAMILIES}."})
    model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "Fine-tune this saved Marian, BART or M2M100/NLLB model (directory or Hub id, e.g. "
            "Helsinki-NLP/opus-mt-es-en) with the link/graph options switched on, instead of training a fresh one."
        },
    )
    tokenizer_name_or_path: str | None = field(
        default=None,
        metadata={"help": "Use this tokenizer instead of training one on the training split."},
    )
    d_model: int = 512
    encoder_layers: int = 6
    decoder_layers: int = 6
    encoder_attention_heads: int = 8
    decoder_attention_heads: int = 8
    encoder_ffn_dim: int = 2048
    decoder_ffn_dim: int = 2048
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    activation_function: str = field(default="relu", metadata={"help": "relu as in the Transformer papers."})
    max_position_embeddings: int = 512
    scale_embedding: bool = field(default=True, metadata={"help": "Multiply embeddings by sqrt(d_model)."})
    attn_implementation: str = field(
        default="auto",
        metadata={
            "help": "'auto', 'sdpa' or 'eager' (the attention link supports both); 'auto' is sdpa, except for a "
            "bf16 run without the attention link on a CPU kind where eager measured faster "
            "(training.precision.BF16_CPU_ATTENTION)."
        },
    )
    license: str = field(default="apache-2.0", metadata={"help": "License written into the model card."})
    lora_r: int = field(
        default=0,
        metadata={
            "help": "Train LoRA adapters of this rank (PEFT) on the saved model instead of every weight; 0 trains "
            "every weight. What the options add trains whole. The run saves the model with the adapter merged in. "
            "Needs model_name_or_path and PEFT (pip install 'hf_graphtf[lora]')."
        },
    )
    lora_alpha: float = field(default=16.0, metadata={"help": "LoRA's scale numerator: updates scale by alpha/r."})
    lora_dropout: float = field(default=0.0, metadata={"help": "Dropout on LoRA's input (PEFT's lora_dropout)."})
    lora_target_modules: list[str] = field(
        default_factory=lambda: list(LORA_TARGET_MODULES),
        metadata={"help": "The linear layers that get adapters, by name (every attention of the three families)."},
    )
    #: whether ``attn_implementation`` was resolved from ``auto`` (by `parse_args`): a resumed run then keeps
    #: the kernel it started with (`training.resume.keep_attention`), though the table may have changed since
    attn_implementation_from_auto: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.model_family not in MODEL_FAMILIES:
            raise ValueError(f"model_family must be one of {MODEL_FAMILIES}; got {self.model_family!r}.")
        # A bad option fails when the recipe is read, not after the corpus is loaded and a tokenizer trained.
        # A fresh model's config is built here, and so validated by its owner, once (`fresh_config`). A saved
        # model's family and sizes are known only from its checkpoint, whose config validates the options in
        # combination when it is loaded; here each value is checked on its own.
        self._check_lora()
        if self.model_name_or_path is None:
            self._fresh_config = FAMILIES[self.model_family].config_class(**self.size_options(), **self.graph_options())
        else:
            for option in GRAPH_OPTIONS:
                option.check("ModelArguments", getattr(self, option.name))

    def _check_lora(self) -> None:
        """LoRA's fields, and that it has a pretrained model to adapt and PEFT to do it, before any data work."""
        if isinstance(self.lora_r, bool) or not isinstance(self.lora_r, int) or self.lora_r < 0:
            raise ValueError(f"lora_r must be a whole number, 0 (no LoRA) or more; got {self.lora_r!r}.")
        if not self.lora_r:
            return
        if self.model_name_or_path is None:
            raise ValueError(
                "lora_r: LoRA adapts the weights of a trained model and a fresh one has none worth keeping; set "
                "model_name_or_path (e.g. Helsinki-NLP/opus-mt-es-en), or lora_r: 0 to train every weight."
            )
        if not self.lora_alpha > 0:
            raise ValueError(f"lora_alpha must be positive; got {self.lora_alpha!r}.")
        if not 0 <= self.lora_dropout < 1:
            raise ValueError(f"lora_dropout must be at least 0 and below 1; got {self.lora_dropout!r}.")
        if not self.lora_target_modules or not all(isinstance(name, str) and name for name in self.lora_target_modules):
            raise ValueError(f"lora_target_modules must name one or more layers; got {self.lora_target_modules!r}.")
        if importlib.util.find_spec("peft") is None:
            raise ValueError("lora_r needs PEFT, which is not installed: pip install 'hf_graphtf[lora]'")

    def lora_options(self) -> dict[str, Any] | None:
        """The LoRA fields as the run records them and a resumed run must match; None without LoRA."""
        if not self.lora_r:
            return None
        return {
            "r": self.lora_r,
            "lora_alpha": self.lora_alpha,
            "lora_dropout": self.lora_dropout,
            "target_modules": sorted(self.lora_target_modules),
        }

    def fresh_config(self, **fields: Any) -> PretrainedConfig:
        """A copy of the config of a fresh model as the recipe describes it, validated when the recipe was
        read, with `fields` set (the vocabulary and special tokens, once a tokenizer exists)."""
        if self.model_name_or_path is not None:
            raise ValueError("fresh_config: this recipe fine-tunes a saved model (model_name_or_path)")
        config = copy.deepcopy(self._fresh_config)
        if "vocab_size" in fields and hasattr(config, "decoder_vocab_size"):
            fields = {"decoder_vocab_size": fields["vocab_size"], **fields}  # Marian derives it at construction
        config.update(fields)
        return config

    def graph_options(self) -> dict[str, Any]:
        """The option fields of `GraphMarianConfig` / `GraphBartConfig`, as set here."""
        return {option.name: getattr(self, option.name) for option in GRAPH_OPTIONS}

    def size_options(self) -> dict[str, Any]:
        """Size and regularisation fields, passed to the config unchanged."""
        names = (*POSITIVE_SIZE_FIELDS, *RATE_FIELDS, "activation_function", "scale_embedding")
        return {name: getattr(self, name) for name in names}


@dataclass
class DataArguments:
    """The parallel corpus, its splits, the subword vocabulary and how results are reported."""

    corpus: str | None = field(
        default=None,
        metadata={
            "help": "A corpus directory of <split>.jsonl/.tsv files (see `hf-graphtf build-corpus`), or a Hub "
            "dataset: a short name (iwslt14-de-en, wmt14-en-de) or an id (with corpus_config)."
        },
    )
    corpus_config: str | None = field(
        default=None, metadata={"help": "Hub dataset configuration, for Hub ids not known by short name."}
    )
    corpus_name: str | None = field(default=None, metadata={"help": "Name shown in the model card."})
    src_lang: str = field(default="es", metadata={"help": "The corpus's source column (e.g. 'es', 'ny')."})
    tgt_lang: str = field(default="en", metadata={"help": "The corpus's target column."})
    src_lang_code: str | None = field(
        default=None,
        metadata={"help": "For tokenizers with language codes (NLLB-200, M2M100): the source's, e.g. 'nya_Latn'."},
    )
    tgt_lang_code: str | None = field(
        default=None,
        metadata={"help": "The target's language code, e.g. 'eng_Latn'; generation is forced to start with it."},
    )
    train_split: str = field(default="train", metadata={"help": "e.g. 'train_10k' for the 10K Bible subset."})
    validation_split: str = "valid"
    test_split: str = "test"
    max_source_length: int = 256
    max_target_length: int = 256
    max_train_samples: int | None = None
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "Evaluate on the first N validation pairs (generation is slow on CPU)."}
    )
    spread_eval_samples: bool = field(
        default=False,
        metadata={
            "help": "Take the max_eval_samples validation pairs evenly spaced over the split (a fixed subset "
            "that covers all of it: the Bible's splits run book by book) instead of the first ones."
        },
    )
    max_test_samples: int | None = None
    vocab_size: int = field(default=8000, metadata={"help": "Joint subword vocabulary trained on the train split."})
    tokenizer_model: str = field(default="unigram", metadata={"help": "'unigram' or 'bpe'."})
    length_buckets: list[int] = field(
        default_factory=lambda: [10, 20, 30, 40, 50],
        metadata={"help": "Upper bounds (source words) of the BLEU-by-length buckets; the last is open."},
    )
    num_sample_translations: int = field(default=5, metadata={"help": "Test translations printed and carded."})
    card_limitations: list[str] = field(
        default_factory=list,
        metadata={"help": "Lines added to the model card's Limitations: what a user of this model must know."},
    )
    preprocessing_num_workers: int | None = None
    pad_to_multiple_of: int | None = field(
        default=None, metadata={"help": "Pad batches to a multiple of this length (8 suits GPU tensor cores)."}
    )

    def __post_init__(self) -> None:
        if self.corpus is None:
            raise ValueError("DataArguments.corpus is required: a corpus directory, a JSONL/TSV file or a Hub id.")
        if self.src_lang == self.tgt_lang:
            raise ValueError(f"src_lang and tgt_lang must differ; both are {self.src_lang!r}.")
        if list(self.length_buckets) != sorted(set(self.length_buckets)) or min(self.length_buckets, default=1) < 1:
            raise ValueError(f"length_buckets must be increasing positive integers; got {self.length_buckets!r}.")
        # 0 would silently switch truncation off; None or a negative number crash later in the tokenizer
        for name in ("max_source_length", "max_target_length", "vocab_size", "num_sample_translations"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name.startswith("num") else 1):
                raise ValueError(f"{name} must be a positive whole number; got {value!r}.")
        for name in ("max_train_samples", "max_eval_samples", "max_test_samples", "pad_to_multiple_of"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive whole number or unset; got {value!r}.")

    @property
    def display_name(self) -> str:
        """How the card and the results name the corpus."""
        if self.corpus_name:
            return self.corpus_name
        return os.path.basename(os.path.normpath(self.corpus)) if os.path.exists(self.corpus) else self.corpus


@dataclass
class TranslationTrainingArguments(Seq2SeqTrainingArguments):
    """`Seq2SeqTrainingArguments` plus early stopping on the validation BLEU and a test beam size.

    A subclass rather than a fourth dataclass because these are training-loop settings, next to
    ``load_best_model_at_end`` which early stopping needs. BLEU needs generated text, so
    `predict_with_generate` defaults to true and the best checkpoint is chosen on `bleu` by default.
    """

    predict_with_generate: bool = field(
        default=True, metadata={"help": "Generate during evaluation so that BLEU and chrF can be computed."}
    )
    metric_for_best_model: str | None = field(
        default="bleu", metadata={"help": "Metric that picks the best checkpoint and drives early stopping."}
    )
    test_num_beams: int | None = field(
        default=None,
        metadata={
            "help": "Beam size for the final test translation (default: generation_num_beams); evaluation "
            "during training can then stay greedy and fast."
        },
    )
    early_stopping_patience: int | None = field(
        default=None,
        metadata={"help": "Stop after this many evaluations without improvement (needs load_best_model_at_end)."},
    )
    early_stopping_threshold: float = field(
        default=0.0, metadata={"help": "Minimum improvement of the metric that resets the patience."}
    )
    early_stopping_watch_loss: bool = field(
        default=False,
        metadata={
            "help": "A new lowest validation loss also resets the patience, so that a run whose BLEU stalls "
            "early in training while its validation loss still falls is not taken for one on its plateau."
        },
    )
    max_tokens_per_batch: int | None = field(
        default=None,
        metadata={
            "help": "Token-based training batches: sentences of similar length, at most this many padded tokens "
            "(sentences x longest side) per batch and process, batch order shuffled each epoch. Replaces "
            "per_device_train_batch_size for training."
        },
    )
    overwrite_output_dir: bool = field(
        default=False,
        metadata={
            "help": "Start over: delete the checkpoints in output_dir instead of resuming from the newest one "
            "(resuming refuses a recipe whose model options differ from the checkpoint's)."
        },
    )
    max_train_minutes: float | None = field(
        default=None,
        metadata={
            "help": "Wall-clock budget for training (evaluations included, summed over resumed runs): then a "
            "last evaluation and checkpoint, the best checkpoint reloaded, and the test split scored."
        },
    )

    precision: str | None = field(
        default=None,
        metadata={
            "help": "'auto', 'fp32' or 'bf16': bf16 autocast (weights and optimizer stay fp32). 'auto' takes bf16 "
            "on a GPU that supports it or a CPU with bf16 instructions (avx512_bf16/AMX), fp32 elsewhere, and "
            "records the choice in results.json (speeds: recipes/benchmarks/RESULTS.md). Unset: as the bf16/fp16 "
            "flags say."
        },
    )

    lr_cooldown_fraction: float = field(
        default=0.0,
        metadata={
            "help": "The last share of the training budget (max_steps or num_train_epochs, or max_train_minutes, "
            "whichever runs out first) over which the learning rate falls linearly to zero, on top of "
            "lr_scheduler_type; 0 (default) keeps the schedule as it is."
        },
    )

    def __post_init__(self) -> None:
        if self.disable_tqdm is None:  # progress bars on a terminal, one line per log event in a log file
            self.disable_tqdm = not sys.stderr.isatty()
        self._resolve_precision()
        super().__post_init__()
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be a positive number; got {self.learning_rate}.")
        if not 0.0 <= self.label_smoothing_factor < 1.0:
            raise ValueError(f"label_smoothing_factor must lie in [0, 1); got {self.label_smoothing_factor}.")
        for name in ("generation_max_length", "generation_num_beams", "test_num_beams"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be a positive whole number or unset; got {value}.")
        if self.max_tokens_per_batch is not None and self.max_tokens_per_batch < 1:
            raise ValueError(f"max_tokens_per_batch must be a positive number; got {self.max_tokens_per_batch}.")
        if self.max_train_minutes is not None and not self.max_train_minutes > 0:
            raise ValueError(f"max_train_minutes must be a positive number; got {self.max_train_minutes}.")
        if not 0.0 <= self.lr_cooldown_fraction < 1.0:
            raise ValueError(f"lr_cooldown_fraction must lie in [0, 1); got {self.lr_cooldown_fraction}.")
        if self.early_stopping_watch_loss and self.early_stopping_patience is None:
            raise ValueError("early_stopping_watch_loss needs early_stopping_patience (it changes what resets it).")
        if self.early_stopping_patience is not None and not self.load_best_model_at_end:
            raise ValueError(
                "early_stopping_patience needs load_best_model_at_end: true (and matching eval/save strategies), "
                "so that the best checkpoint is the one kept."
            )

    def _resolve_precision(self) -> None:
        """Turn ``precision`` into the Trainer's own ``bf16`` flag (before its checks run), or read it back
        from the bf16/fp16 flags, so that ``precision`` always names what the run trains in."""
        if self.precision is None:
            self.precision = "bf16" if self.bf16 else "fp16" if self.fp16 else "fp32"
            return
        if self.bf16 or self.fp16:
            flag = "bf16" if self.bf16 else "fp16"
            raise ValueError(
                f"precision {self.precision!r} and {flag}: true are both set: set precision alone "
                "('auto', 'fp32' or 'bf16')."
            )
        import torch

        on_cpu = self.use_cpu or not torch.cuda.is_available()
        self.precision = resolve_precision(self.precision, use_cpu=on_cpu)
        if self.precision == "bf16":
            self.bf16 = True
            if on_cpu:
                self.use_cpu = True  # the Trainer runs bf16 autocast on the CPU only when told it is on one


ARGUMENT_CLASSES = (ModelArguments, DataArguments, TranslationTrainingArguments)


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def check_lengths(model_args: ModelArguments, data_args: DataArguments, training_args: TranslationTrainingArguments):
    """Maximum lengths a fresh model can hold: a sentence longer than ``max_position_embeddings`` would
    index past the position table (an IndexError in the middle of training, or of the test)."""
    if model_args.model_name_or_path is not None:
        return  # a saved model's own table is checked when it is loaded (`check_saved_model_lengths`)
    limit = model_args.max_position_embeddings
    for name, value in (
        ("max_source_length", data_args.max_source_length),
        ("max_target_length", data_args.max_target_length),
        ("generation_max_length", training_args.generation_max_length),
    ):
        if value is not None and value > limit:
            raise ValueError(
                f"{name} ({value}) exceeds max_position_embeddings ({limit}): lower it or raise the other."
            )


class _UniqueKeyLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses a key given twice (plain YAML keeps the last, silently)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise ValueError(
                    f"{self.name}, line {key_node.start_mark.line + 1}: {key!r} is given twice "
                    f"(first on line {seen[key]}); a recipe names each argument once."
                )
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def load_recipe(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a recipe YAML file: a flat mapping of argument names to values, each named once."""
    try:
        with open(path, encoding="utf-8-sig") as handle:
            recipe = yaml.load(handle, Loader=_UniqueKeyLoader) or {}
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such recipe file") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text (byte offset {error.start})") from None
    except yaml.YAMLError as error:
        raise ValueError(f"{path}: not valid YAML ({error})") from None
    if not isinstance(recipe, dict):
        kind = type(recipe).__name__
        raise ValueError(f"{path}: a recipe must be a mapping of argument names to values; got a {kind}.")
    return recipe


def _check_recipe_values(recipe_path: str, recipe: dict[str, Any], parser: HfArgumentParser) -> None:
    """Convert each text value of a recipe as its flag would be, naming the file and key when it fails.

    argparse converts the parser's defaults only when it parses, and reports a failure as a usage dump
    with an error that names the flag but not the recipe (``learning_rate: 1e-3x``)."""
    actions = {action.dest: action for action in parser._actions}
    for key, value in recipe.items():
        convert = actions[key].type
        if not isinstance(value, str) or not callable(convert) or convert is str:
            continue
        try:
            convert(value)
        except (TypeError, ValueError, argparse.ArgumentTypeError):
            kind = {"string_to_bool": "true/false"}.get(
                getattr(convert, "__name__", ""), getattr(convert, "__name__", "")
            )
            raise ValueError(f"{recipe_path}: {key}: {value!r} is not a valid {kind or 'value'}.") from None


def parse_recipe_args(
    argv: Sequence[str] | None = None,
) -> tuple[ModelArguments, DataArguments, TranslationTrainingArguments]:
    """Parse ``[recipe.yaml] [--flag value ...]`` into the three argument dataclasses.

    The recipe's values become the parser's defaults, so any flag on the command line wins over the
    file (``recipe.yaml --max_steps 20``). Unknown recipe keys are an error, not silently ignored.
    """
    parser = HfArgumentParser(ARGUMENT_CLASSES)
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and not argv[0].startswith("-") and not argv[0].endswith(RECIPE_SUFFIXES):
        raise ValueError(
            f"{argv[0]}: a recipe is a YAML file ({' or '.join(RECIPE_SUFFIXES)}); flags start with '--'. "
            "A JSON or other file cannot be read as a recipe."
        )
    if argv and argv[0].endswith(RECIPE_SUFFIXES):
        recipe_path = argv.pop(0)
        recipe = load_recipe(recipe_path)
        known = {action.dest for action in parser._actions}
        unknown = sorted(set(recipe) - known)
        if unknown:
            raise ValueError(f"{recipe_path}: unknown argument(s) {', '.join(unknown)}.")
        _check_recipe_values(recipe_path, recipe, parser)
        parser.set_defaults(**recipe)
    model_args, data_args, training_args = parser.parse_args_into_dataclasses(args=argv, look_for_args_file=False)
    model_args.attn_implementation_from_auto = model_args.attn_implementation == "auto"
    model_args.attn_implementation = resolve_attention(
        model_args.attn_implementation,
        training_args.precision,
        on_cpu=training_args.use_cpu or not _cuda(),
        attention_link=model_args.attention_link,
    )
    check_lengths(model_args, data_args, training_args)
    if not (training_args.do_train or training_args.do_eval or training_args.do_predict):
        raise ValueError(
            "the recipe asks for nothing to run: set do_train: true to train (with do_eval: true for the validation "
            "score and do_predict: true to score the test split), or pass --do_train true"
        )
    _quiet_pin_memory(training_args)
    return model_args, data_args, training_args


def _quiet_pin_memory(training_args: TranslationTrainingArguments) -> None:
    """No pinned memory where nothing would use it: without an accelerator (or with ``use_cpu``) torch's data
    loader warns once per loader that pinning does nothing, three times a run; with one, the Trainer's
    default (pinned) stays."""
    if training_args.use_cpu or not _cuda():
        training_args.dataloader_pin_memory = False
