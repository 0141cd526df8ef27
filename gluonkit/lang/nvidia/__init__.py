"""Frontend builtins of NVIDIA hardware units, grouped like Gluon's
``language.nvidia`` tree: :mod:`.ampere` and :mod:`.hopper` (the namespaces), :mod:`.async_copy`,
:mod:`.tma`, :mod:`.wgmma`."""
