"""Lowering rules of NVIDIA hardware units, one file per unit, grouped like the user tree
``gluonkit.language.nvidia``: mbarriers, TMA, warpgroup MMA (and its descriptors)."""
