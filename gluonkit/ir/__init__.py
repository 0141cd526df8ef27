"""gluonkit IR: types, ops, regions, printer and verifier (may import layouts)."""
