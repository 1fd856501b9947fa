"""Graph-group attention and Attention Link for Marian, BART and M2M100 (NLLB-200) translation models.

Importing the package registers the configurations with `AutoConfig` and the models with
`AutoModel` and `AutoModelForSeq2SeqLM`, so `from_pretrained` works on any saved checkpoint. It
changes nothing in Transformers' pipeline tables: `TranslationPipeline` is used directly, and saved
checkpoints carry it for `pipeline("translation", model=..., trust_remote_code=True)`.
"""

from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM

from .configuration import GraphBartConfig, GraphM2M100Config, GraphMarianConfig
from .families import FAMILIES
from .modeling_bart import GraphBartForConditionalGeneration, GraphBartModel
from .modeling_m2m_100 import GraphM2M100ForConditionalGeneration, GraphM2M100Model
from .modeling_marian import GraphMarianModel, GraphMarianMTModel
from .transformers_seam import warn_if_untested
from .translation_pipeline import TranslationPipeline

__version__ = "0.1.0"

warn_if_untested()  # once, at import: a newer Transformers or torch than the tested ones

for _family in FAMILIES.values():
    AutoConfig.register(_family.model_type, _family.config_class, exist_ok=True)
    AutoModel.register(_family.config_class, _family.base_model_class, exist_ok=True)
    AutoModelForSeq2SeqLM.register(_family.config_class, _family.seq2seq_class, exist_ok=True)

__all__ = [
    "GraphBartConfig",
    "GraphBartForConditionalGeneration",
    "GraphBartModel",
    "GraphM2M100Config",
    "GraphM2M100ForConditionalGeneration",
    "GraphM2M100Model",
    "GraphMarianConfig",
    "GraphMarianModel",
    "GraphMarianMTModel",
    "TranslationPipeline",
]
