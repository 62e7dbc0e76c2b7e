"""The loss smsg-ms puts on a network that computes none (no ``loss`` in its spec): the mean of
its output, summed over the outputs when it returns several (a tuple or list: a network that
returns its losses, ``return ce, aux, reg``), as a user's training step adds them before
``TrainOneStepCell`` (which needs one scalar). ``square``: the mean of each output squared
(the pipelined compile: its gradient depends on the micro-batch, so MindSpore cannot merge the
micro-batches' backward passes as common terms). MindSpore's ``ReduceMean`` refuses a tuple
("Failed calling ReduceMean with x=Tuple[...]"), so the outputs are reduced one by one.
"""
from __future__ import annotations


def outputs_mean(square: bool = False):
    """A Cell ``out -> scalar``: ``mean(out)`` (``mean(out²)`` with ``square``), summed over
    the elements of a tuple or list ``out``. Shapes: any; result a 0-d tensor of the outputs'
    dtype."""
    from mindspore import nn, ops

    class _OutputsMean(nn.Cell):
        def __init__(self):
            super().__init__()
            self.mean = ops.ReduceMean()
            self.square = ops.Square()

        def _one(self, x):
            if square:
                return self.mean(self.square(x))
            return self.mean(x)

        def construct(self, out):
            if isinstance(out, (tuple, list)):
                total = self._one(out[0])
                for x in out[1:]:
                    total = total + self._one(x)
                return total
            return self._one(out)

    return _OutputsMean()


__all__ = ["outputs_mean"]
