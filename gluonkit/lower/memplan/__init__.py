"""Memory planning before lowering: shared-memory buffer lifetimes and offsets
(:mod:`.liveness`, :mod:`.smem`), scratch space for conversions and reductions
(:mod:`.scratch`, :mod:`.scratch_use`) and the barriers between conflicting accesses
(:mod:`.barriers`)."""
