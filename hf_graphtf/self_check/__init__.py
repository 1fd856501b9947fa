"""`hf-graphtf check`: the model battery's core checks, run on the user's own install and device.

The models follow Transformers' internals (`hf_graphtf.transformers_seam`), so a Transformers or torch
release the package was not tested with can change what they compute without an error. This runs, for
each family and each option set of the test matrix, on tiny random models:

* **vanilla**: with every option off the model computes exactly what the vanilla Transformers class
  computes with the same weights (once per family);
* **spec**: the outputs equal a plain re-computation of docs/method.md's formulas (`reference`), done in
  float64 on the same weights, to the tolerance of the dtype checked;
* **cached**: generation with the KV cache agrees with generation without it, greedy and beam search;
* **save/load**: a saved model reloads through the Auto classes and gives the same outputs.

One line per check, the versions first; `run_checks` returns whether all passed.

The checks are in `checks`, the runner in `runner`; the models and inputs they use in `matrix`, the
re-computation in `reference`.
"""

from __future__ import annotations

from .checks import DTYPES, Case, CheckFailed, spec_pairs
from .runner import checks_for, run_checks, versions

__all__ = ["DTYPES", "Case", "CheckFailed", "checks_for", "run_checks", "spec_pairs", "versions"]
