"""Letter helpers shared by the family modules: broadcasting and fresh letters."""
from __future__ import annotations

FREE = "abcdefghijpqrstuvwxyz"


class Letters:
    """Hands out fresh letters and records their sizes (``1`` for a broadcast dimension)."""

    def __init__(self):
        self.sizes: dict[str, object] = {}
        self._dummy = 0

    def new(self, size, pool: str = FREE) -> str:
        for ch in pool:
            if ch not in self.sizes:
                self.sizes[ch] = size
                return ch
        raise ValueError("operator has too many dimensions for the letter pool")

    def dummy(self) -> str:
        """A letter of size 1 for a broadcast dimension (never cut, not in the device matrix)."""
        ch = chr(ord("A") + self._dummy)
        self._dummy += 1
        self.sizes[ch] = 1
        return ch


def broadcast(shapes: list[tuple], letters: Letters) -> tuple[list[str], str]:
    """Right-aligned NumPy broadcasting: letters of each input and of the output.

    An input dimension of size 1 facing a larger one gets a dummy letter (MindSpore's
    ``arithmetic_info.cc`` requires its cut to be 1).
    """
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(rank):
        dims = [s[len(s) - rank + d] for s in shapes if len(s) - rank + d >= 0]
        size = next((x for x in dims if x != 1), 1)
        out.append(letters.new(size))
    ins = []
    for s in shapes:
        off = rank - len(s)
        ins.append("".join(out[off + d] if (s[d] == letters.sizes[out[off + d]])
                           else letters.dummy() for d in range(len(s))))
    return ins, "".join(out)
