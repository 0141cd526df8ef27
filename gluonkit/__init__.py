"""gluonkit: a Python kernel language for NVIDIA GPUs with explicit layouts.

The programmer decides where every element lives (distributed, shared and tensor-memory
layouts), when asynchronous work completes (mbarriers) and which warps do what; a thin
compiler maps these decisions to LLVM IR and PTX, and a CPU interpreter runs the same IR.
See ``docs/`` and the design notes in ``docs/design.rst``.
"""

__version__ = "0.1.0"
