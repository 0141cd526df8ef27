"""What users write: @jit, tensor builtins, memory descriptors, Hopper/Blackwell ops (may import ir, layouts)."""
