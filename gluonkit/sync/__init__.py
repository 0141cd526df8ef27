"""Synchronization vocabulary: mbarriers, fences, thread_barrier, tokens, warp_specialize (may import ir, layouts)."""
