"""Debug line info: every LLVM instruction carries the user's Python line.

The compile unit uses ``DebugDirectivesOnly`` emission, so the PTX gets ``.file``/``.loc``
directives (what profilers and ``cuobjdump -lineinfo`` read) without DWARF sections.
Ops inlined from another file get a lexical-block scope for that file.
"""

from __future__ import annotations

import os
from typing import Dict

import llvmlite.ir as lir

from ..ir import Location

__all__ = ["DebugInfo"]


class DebugInfo:
    """Builds the compile unit and subprogram of one kernel and a DILocation per op."""

    def __init__(self, module: lir.Module, fn: lir.Function, loc: Location):
        self.module = module
        self._files: Dict[str, lir.DIValue] = {}
        self._scopes: Dict[str, lir.DIValue] = {}
        main_file = self._file(loc.file)
        unit = module.add_debug_info("DICompileUnit", {
            "language": lir.DIToken("DW_LANG_Python"),
            "file": main_file,
            "producer": "gluonkit",
            "isOptimized": True,
            "emissionKind": lir.DIToken("DebugDirectivesOnly"),
        }, is_distinct=True)
        module.add_named_metadata("llvm.dbg.cu", unit)
        i32 = lir.IntType(32)
        module.add_named_metadata("llvm.module.flags", [
            i32(2), lir.MetaDataString(module, "Debug Info Version"), i32(3)])
        self.subprogram = module.add_debug_info("DISubprogram", {
            "name": fn.name,
            "file": main_file,
            "line": loc.line,
            "unit": unit,
            "type": module.add_debug_info("DISubroutineType", {"types": module.add_metadata([])}),
            "spFlags": lir.DIToken("DISPFlagDefinition | DISPFlagOptimized"),
        }, is_distinct=True)
        fn.set_metadata("dbg", self.subprogram)
        self._scopes[loc.file] = self.subprogram

    def _file(self, path: str) -> lir.DIValue:
        if path not in self._files:
            directory, name = os.path.split(os.path.abspath(path)) if path.startswith(("/", ".")) else ("", path)
            self._files[path] = self.module.add_debug_info("DIFile", {"filename": name, "directory": directory})
        return self._files[path]

    def location(self, loc: Location) -> lir.DIValue:
        """The DILocation of ``loc``, in the scope of the file it is in."""
        if loc.file not in self._scopes:
            self._scopes[loc.file] = self.module.add_debug_info("DILexicalBlockFile", {
                "scope": self.subprogram, "file": self._file(loc.file), "discriminator": 0})
        return self.module.add_debug_info("DILocation", {
            "line": loc.line, "column": loc.col + 1, "scope": self._scopes[loc.file]})
