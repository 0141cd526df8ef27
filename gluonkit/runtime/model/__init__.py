"""The cost model: modelled timelines and predicted times of launches, on the CPU.

The interpreter runs the programs that share one SM and records their event schedule
(:mod:`.recorder`); a discrete-event simulation (:mod:`.simulate`) times it with a per-target
cost table (:mod:`.tables`); :func:`predict` scales one SM's time to the launch.  See
``docs/timelines.rst`` ("Modelled timelines") for how to read the result.
"""

from .predict import Prediction, extrapolate, for_interpreter, launch_time_us, modelling, predict, predict_ir
from .tables import SM90A, SM100A, TABLES, CostTable, table_for

__all__ = ["predict", "predict_ir", "modelling", "for_interpreter", "Prediction", "extrapolate", "launch_time_us",
           "CostTable", "SM90A", "SM100A", "TABLES",
           "table_for"]
