"""CPU interpreter of the IR on numpy, with asynchronous semantics and a hazard checker (may import ir, layouts)."""
