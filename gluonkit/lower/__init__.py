"""Layout inference for AutoLayout, IR to LLVM IR, NVPTX code generation, ptxas (may import ir, layouts)."""
