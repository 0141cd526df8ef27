"""Interpreter rules of NVIDIA hardware units, one file per unit: mbarriers, TMA, warpgroup MMA."""
