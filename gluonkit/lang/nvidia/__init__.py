"""Frontend builtins of NVIDIA hardware units, grouped like Gluon's
``language.nvidia`` tree: :mod:`.hopper` (the namespace), :mod:`.tma`, :mod:`.wgmma`."""
