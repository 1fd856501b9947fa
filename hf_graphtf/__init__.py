"""Graph-group attention and Attention Link for Marian and BART translation models.

Importing the package registers both configurations with `AutoConfig` and the models with
`AutoModel` and `AutoModelForSeq2SeqLM`, so `from_pretrained` works on any saved checkpoint. It
changes nothing in Transformers' pipeline tables: `TranslationPipeline` is used directly, and saved
checkpoints carry it for `pipeline("translation", model=..., trust_remote_code=True)`.
"""

from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM

from .configuration import GraphBartConfig, GraphMarianConfig
from .modeling_bart import GraphBartForConditionalGeneration, GraphBartModel
from .modeling_marian import GraphMarianModel, GraphMarianMTModel
from .translation_pipeline import TranslationPipeline

__version__ = "0.1.0"

for _config, _base, _seq2seq in (
    (GraphMarianConfig, GraphMarianModel, GraphMarianMTModel),
    (GraphBartConfig, GraphBartModel, GraphBartForConditionalGeneration),
):
    AutoConfig.register(_config.model_type, _config, exist_ok=True)
    AutoModel.register(_config, _base, exist_ok=True)
    AutoModelForSeq2SeqLM.register(_config, _seq2seq, exist_ok=True)

__all__ = [
    "GraphBartConfig",
    "GraphBartForConditionalGeneration",
    "GraphBartModel",
    "GraphMarianConfig",
    "GraphMarianModel",
    "GraphMarianMTModel",
    "TranslationPipeline",
]
