"""Several narrow register values as one machine word, and back: what packed PTX operands need.

``pack_words`` puts ``per`` consecutive values of one LLVM scalar type into an LLVM vector
and, when the vector is 32 or 64 bits wide, bitcasts it to an integer of that width (a
``b32``/``b64`` register for inline PTX); ``unpack_word`` undoes it.  Used by
``inline_asm_elementwise`` (elements narrower than 32 bits share a register) and by the packed
arithmetic (two float32 in a 64-bit register, two 16-bit floats in a 32-bit one).
"""

from __future__ import annotations

from typing import List

import llvmlite.ir as lir

from .llvm_types import I32, bit_width

__all__ = ["word_type", "pack_words", "unpack_word"]


def word_type(elem: lir.Type, per: int) -> lir.Type:
    """The type of one word holding ``per`` values of ``elem``."""
    if per == 1:
        return elem
    width = per * bit_width(elem)
    return lir.IntType(width) if width in (32, 64) else lir.VectorType(elem, per)


def pack_words(builder: lir.IRBuilder, values: List[lir.Value], per: int) -> List[lir.Value]:
    """``values`` taken ``per`` at a time, each group as one word (:func:`word_type`)."""
    if per == 1:
        return list(values)
    out = []
    for i in range(0, len(values), per):
        vector = lir.Constant(lir.VectorType(values[0].type, per), None)
        for j, v in enumerate(values[i:i + per]):
            vector = builder.insert_element(vector, v, I32(j))
        word = word_type(values[0].type, per)
        out.append(vector if isinstance(word, lir.VectorType) else builder.bitcast(vector, word))
    return out


def unpack_word(builder: lir.IRBuilder, word: lir.Value, elem: lir.Type, per: int) -> List[lir.Value]:
    """The ``per`` values of ``elem`` in ``word``, in order."""
    if per == 1:
        return [word]
    vector = builder.bitcast(word, lir.VectorType(elem, per))
    return [builder.extract_element(vector, I32(j)) for j in range(per)]
