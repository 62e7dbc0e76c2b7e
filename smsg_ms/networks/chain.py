"""A network that is a chain of blocks (``blocks.0`` ... ``blocks.{n-1}``), each block's output the
next one's input: the repeated blocks the pipeline cuts between."""
from __future__ import annotations


def chain(blocks: list):
    """The cell that runs ``blocks`` (MindSpore cells, each ``x → x`` of the input's shape) in
    order; the block ``i``'s primitives are under the attribute path ``blocks.{i}``."""
    from mindspore import nn

    class Chain(nn.Cell):
        def __init__(self):
            super().__init__()
            self.blocks = nn.CellList(blocks)

        def construct(self, x):
            for block in self.blocks:
                x = block(x)
            return x

    return Chain()
