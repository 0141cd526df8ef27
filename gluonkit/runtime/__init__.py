"""cuda-python driver layer: devices, loading, launches, TMA descriptors, cache (may import everything above)."""
