"""Old import paths of modules that moved, kept working for one release with a `DeprecationWarning`.

The translation wing moved into `hf_graphtf.translation` (0.2): ``hf_graphtf.inference`` is now
``hf_graphtf.translation.inference``, and so on (`MOVED_MODULES`). A module at an old path is a few lines that
call `forward`: importing it warns once, naming the new path, and each name read from it is looked up in its
new home, under its new name where it was renamed (`RENAMED`), so code written against 0.1 runs unchanged.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

#: the release after which the old paths go
REMOVED_IN = "0.3"

#: old module (under hf_graphtf) -> where its names are now, first match wins
MOVED_MODULES: dict[str, tuple[str, ...]] = {
    "translation_formats": ("hf_graphtf.translation.dtypes",),
    "translation_modes": ("hf_graphtf.translation.dtype_choice",),
    "translation_engines": ("hf_graphtf.translation.engines",),
    "inference": ("hf_graphtf.translation.inference", "hf_graphtf.translation.loading"),
    "exported_models": ("hf_graphtf.translation.aoti", "hf_graphtf.translation.packages"),
    "exported_decoding": ("hf_graphtf.translation.exported_decoding",),
    "export_graphs": ("hf_graphtf.translation.export_graphs",),
    "file_translation": ("hf_graphtf.translation.file_translation",),
    "int8_linear": ("hf_graphtf.translation.int8_linear",),
    "package_store": ("hf_graphtf.translation.package_store",),
}

#: names that changed with the move, so that the option's one word, ``--dtype``, names the number format
RENAMED: dict[str, str] = {
    "TranslationFormat": "TranslationDtype",
    "TRANSLATION_FORMATS": "DTYPE_RECORDS",
    "register_translation_format": "register_dtype",
    "format_names": "dtype_names",
    "float_format_names": "float_dtype_names",
    "translation_format": "dtype_record",
    "exportable_formats": "exportable_dtypes",
    "TranslationMode": "DecodingSetup",
    "_model_summary": "model_summary",
}


def forward(old_module: str) -> Callable[[str], Any]:
    """Warn that ``old_module`` (``hf_graphtf.<name>``) moved, and give it the module ``__getattr__`` that
    reads each name from its new home."""
    short = old_module.rsplit(".", 1)[1]
    homes = MOVED_MODULES[short]
    warnings.warn(
        f"{old_module} moved to {homes[0]}; the old path goes in hf_graphtf {REMOVED_IN}",
        DeprecationWarning,
        stacklevel=3,
    )

    def __getattr__(name: str) -> Any:
        wanted = RENAMED.get(name, name)
        for home in homes:
            module = importlib.import_module(home)
            if hasattr(module, wanted):
                return getattr(module, wanted)
        raise AttributeError(f"module {old_module!r} (now {homes[0]}) has no attribute {name!r}")

    return __getattr__
