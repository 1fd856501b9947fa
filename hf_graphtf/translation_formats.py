"""Old path of `hf_graphtf.translation.dtypes`, kept until 0.3 with a DeprecationWarning (`_moved`)."""

from ._moved import forward

__getattr__ = forward(__name__)
