"""From LLVM IR to a cubin: targets (:mod:`.targets`), NVPTX code generation
(:mod:`.nvptx`) and ptxas (:mod:`.ptxas`)."""
