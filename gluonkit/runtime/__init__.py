"""Running kernels: launches (:mod:`.launch`, which ``import gluonkit`` registers with the
frontend and which runs kernels in the CPU interpreter under ``GLUONKIT_INTERPRET=1``) and
the cuda-python driver layer: devices, loading, argument packing, TMA descriptors, cache
(may import everything above)."""
