"""Which context-parallel forms of FlashAttentionScore MindSpore 2.10's parallel compiler
accepts (issue #17 item 2): each form compiled alone in the CPU dry-run (8 devices, semi-auto
parallel, ``smsg_ms.networks.testnets``), printing what MindSpore inserted or its message.

One causal attention (BSH, ``sparse_mode`` 2 unless said, batch 1, sequence 1024, 2 heads of
64, float32), its query, key and value ``Add(data, w)`` activations cut as the form needs:

* ``S1 cut``: queries cut 4 along the sequence, keys and values whole (``(1, 4, 2)``,
  ``(1, 1, 2)``): the form smsg-ms searches (all-gather-KV context parallel);
* ``S2 cut``: keys and values cut along their sequence too, no attribute;
* ``ring attention``: the same cut with ``enable_ring_attention`` and ``enable_ra_send_recv``
  (mindformers' ``use_ring_attention``);
* ``FlashSP``: the same cut with ``enable_flash_sp``; both also with ``sparse_mode`` 0;
* ``Ulysses``: 16 heads of 64; the activations cut 4 along the sequence and 2 along heads
  (``(1, 4, 2)``), the attention 8 along heads (``(1, 1, 8)``), with ``enable_alltoall`` (the
  sequence-to-head exchange as a redistribution, which MindSpore may make an AlltoAll).

    python scripts/context_parallel_forms.py
"""
from __future__ import annotations

from collections import Counter

SPEC = "smsg_ms.networks.testnets:build"
NONES = [None] * 7


def form(q_cut, kv_cut, fa_q, fa_kv, attrs=None, heads=2, hidden=128, mode=2):
    shape_q, shape_kv = [1, 1024, hidden], [1, 1024, hidden]
    step = {"type": "FlashAttentionScore",
            "init": {"head_num": heads, "input_layout": "BSH", "sparse_mode": mode},
            "inputs": [["act", shape_q], ["act", shape_kv], ["act", shape_kv]],
            "args": NONES, "prim_attrs": attrs or {}}
    strategies = {"cases.0.steps.0.op": [fa_q, fa_kv, fa_kv],
                  "cases.0.steps.0.pre0": [q_cut, q_cut],
                  "cases.0.steps.0.pre1": [kv_cut, kv_cut],
                  "cases.0.steps.0.pre2": [kv_cut, kv_cut]}
    return [{"ops": [step]}], strategies


RA = {"enable_ring_attention": True, "enable_ra_send_recv": True}
FORMS = {
    "S1 cut": form([1, 4, 2], [1, 4, 2], [1, 4, 2], [1, 1, 2]),
    "S1 cut, full attention (sparse_mode 0)": form([1, 4, 2], [1, 4, 2], [1, 4, 2], [1, 1, 2],
                                                   mode=0),
    "S2 cut": form([1, 4, 2], [1, 4, 2], [1, 4, 2], [1, 4, 2]),
    "ring attention": form([1, 4, 2], [1, 4, 2], [1, 4, 2], [1, 4, 2], RA),
    "ring attention, full attention (sparse_mode 0)": form([1, 4, 2], [1, 4, 2], [1, 4, 2],
                                                           [1, 4, 2], RA, mode=0),
    "FlashSP": form([1, 4, 2], [1, 4, 2], [1, 4, 2], [1, 4, 2], {"enable_flash_sp": True}),
    "FlashSP, full attention (sparse_mode 0)": form([1, 4, 2], [1, 4, 2], [1, 4, 2], [1, 4, 2],
                                                    {"enable_flash_sp": True}, mode=0),
    "Ulysses (AlltoAll), sequence 8 to heads 8": form([1, 8, 1], [1, 8, 1], [1, 1, 8],
                                                      [1, 1, 8], heads=16, hidden=1024),
    "Ulysses (AlltoAll)": form([1, 4, 2], [1, 4, 2], [1, 1, 8], [1, 1, 8], heads=16,
                               hidden=1024),
}


def main(argv=None) -> None:
    import argparse

    from smsg_ms.dryrun import runner

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("forms", nargs="*", choices=[[]] + list(FORMS),
                        help="forms to compile (default: all)")
    chosen = parser.parse_args(argv).forms or list(FORMS)
    for name in chosen:
        cases, strategies = FORMS[name]
        job = {"job": "compile", "spec": SPEC, "options": {"cases": cases},
               "strategies": strategies}
        if name.startswith("Ulysses"):
            job["enable_alltoall"] = True
        try:
            result = runner.run_child(job, devices=8)
        except runner.DryRunError as err:
            print(f"{name}: refused ({err.kind}): {str(err).strip()[:600]}")
            continue
        seen = Counter((c["type"], c["pass"], c["group_size"])
                       for c in result["collectives"] if "cases-CellList" in c["scope"])
        print(f"{name}: compiled; in the case: {dict(sorted(seen.items())) or 'no collective'}")


if __name__ == "__main__":
    main()
