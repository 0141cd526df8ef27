"""Layout inference for ``AutoLayout`` values: constraints from each op (:mod:`.rules`,
:mod:`.constraints`), derived layouts (:mod:`.derive`) and the solver (:mod:`.solve`)."""

from .solve import infer_layouts

__all__ = ["infer_layouts"]
