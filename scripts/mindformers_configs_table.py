"""The pretrain YAMLs of the mindformers 1.9.0 wheel (``configs/`` in site-packages): the shipped
(expert) configuration beside smsg's plan for the same model and device count.

Per YAML, through the CLI: ``score --mindformers-config`` (the YAML's own dp/mp/pp,
micro-batches, recompute, optimizer sharding and, for a MoE model, expert_parallel, priced by
smsg's model at ``pp`` layers),
``plan --mindformers-config --pipeline auto`` (smsg's plan on dp·mp·pp devices, the YAML's global
batch, ``pp`` layers), and ``compare --mindformers-config --planners smsg`` (one stage of
dp·mp devices at 2 layers: the collectives MindSpore's compiler inserts for smsg's plan and for
the YAML's own ``shard()`` strategies). Widths reduced (:data:`SMALL`) so the CPU dry-run
compiles in seconds; the YAML's heads:KV-heads ratio is kept.

Writes the section between the markers of ``docs/benchmarks.md``.
Run: ``PYTHONPATH=$PWD nice python scripts/mindformers_configs_table.py [STEM ...]`` (with YAML
stems, only their rows are made again).
"""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = Path(importlib.util.find_spec("mindformers").origin).parent.parent / "configs"
YAMLS = ["qwen3/pretrain_qwen3_32b_4k.yaml", "qwen3_moe/pretrain_qwen3_30b_a3b_4k.yaml",
         "deepseek3/pretrain_deepseek3_671b.yaml", "deepseek3/pretrain_deepseek3_12b_16p_pp16.yaml",
         "telechat3/pretrain_telechat3_36b.yaml", "general/llm_pretrain_dense_template.yaml",
         "general/llm_pretrain_moe_template.yaml"]
SMALL = ["--hidden", "512", "--ffn", "1024", "--vocab", "4096", "--seq", "256"]
BEGIN, END = "<!-- mindformers-configs:begin -->", "<!-- mindformers-configs:end -->"


#: seconds one command may take (``SMSG_MF_TABLE_TIMEOUT``); a command past it is a row's reason
TIMEOUT = float(os.environ.get("SMSG_MF_TABLE_TIMEOUT", "1800"))


def smsg(*args, cwd) -> tuple[int, str, str]:
    # its own session, so a command past the limit is ended with its dry-run children
    proc = subprocess.Popen([sys.executable, "-m", "smsg_ms.cli", *map(str, args)], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return 1, "", f"smsg-ms {args[0]} did not end within {TIMEOUT:.0f} s on this machine"
    proc = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    with open(Path(cwd) / "commands.log", "a", encoding="utf-8") as log:   # kept for reading
        log.write(json.dumps({"args": list(map(str, args)), "rc": proc.returncode,
                              "stdout": stdout[-20000:], "stderr": stderr[-5000:]}) + "\n")
    return proc.returncode, proc.stdout, proc.stderr.strip().splitlines()[-1:] and \
        proc.stderr.strip().splitlines()[-1] or ""


def heads_of(model_config: dict, mp: int) -> list[str]:
    """8 heads, KV heads at the YAML's query:KV ratio but at least ``mp`` (mindformers wants the
    KV heads a multiple of model_parallel)."""
    heads = int(model_config.get("num_attention_heads", 8))
    kv = int(model_config.get("num_key_value_heads") or heads)
    return ["--heads", "8", "--kv-heads", str(max(1, 8 * kv // heads, mp))]


#: the templates name no model (``pretrained_model_dir: path/to/model_dir``): each is given the
#: model of the wheel's own YAML of its kind, that YAML's ``model_config`` as the folder's
#: ``config.json``
TEMPLATE_MODELS = {"general/llm_pretrain_dense_template.yaml": "qwen3/pretrain_qwen3_32b_4k.yaml",
                   "general/llm_pretrain_moe_template.yaml":
                       "qwen3_moe/pretrain_qwen3_30b_a3b_4k.yaml"}


def with_model_folder(name: str, work: Path) -> tuple[Path, str]:
    """``(YAML to run, note)``: a template copied with ``pretrained_model_dir`` pointing at a
    folder whose ``config.json`` is the model of :data:`TEMPLATE_MODELS`; other YAMLs as
    shipped."""
    path = CONFIGS / name
    if name not in TEMPLATE_MODELS:
        return path, ""
    folder = work / (Path(name).stem + "_model")
    folder.mkdir(exist_ok=True)
    model = yaml.safe_load((CONFIGS / TEMPLATE_MODELS[name]).read_text())["model"]["model_config"]
    (folder / "config.json").write_text(json.dumps(model, indent=1))
    data = yaml.safe_load(path.read_text())
    data["pretrained_model_dir"] = str(folder)
    copy = work / Path(name).name
    copy.write_text(yaml.safe_dump(data, sort_keys=False))
    return copy, f" (model: `{Path(TEMPLATE_MODELS[name]).stem}`'s model_config)"


def cell_text(reason: str) -> str:
    """The whole reason in one table cell (the renderer wraps it): ``|`` escaped, line breaks
    as spaces."""
    return " ".join(reason.split()).replace("|", "\\|")


def _flat(value) -> list:
    return [x for v in value for x in _flat(v)] if isinstance(value, list) else [value]


def dense_first_layers(model_config: dict) -> int:
    """``first_k_dense_replace`` of the YAML, or its configuration class's default when the YAML
    leaves it out (DeepSeek-V3 671B: ``DeepseekV3Config``'s 3); 0 for other models."""
    if "first_k_dense_replace" in model_config:
        return int(model_config["first_k_dense_replace"] or 0)
    if model_config.get("model_type") == "deepseek_v3":
        import inspect

        from mindformers.models.deepseek3.configuration_deepseek_v3 import DeepseekV3Config
        return int(inspect.signature(DeepseekV3Config).parameters["first_k_dense_replace"]
                   .default)
    return 0


def plan_memory(plan: dict) -> float:
    """Bytes per device of a plan (``plan --json``), as ``score`` gives the shipped
    configuration's: for a plan with a pipeline record (``--pipeline``) the largest stage's (``pipeline.stage_memory_bytes``;
    ``totals.memory_bytes`` is then one micro-batch through the whole network on one stage's
    devices) plus the experts' change per stage (``totals.expert_memory_bytes``, already per
    stage); else ``totals.memory_bytes``."""
    stages = (plan.get("pipeline") or {}).get("stage_memory_bytes") or []
    if stages:
        return max(stages) + float(plan["totals"].get("expert_memory_bytes") or 0.0)
    return float(plan["totals"]["memory_bytes"])


def row(name: str, work: Path) -> str:
    path, model_note = with_model_folder(name, work)
    data = yaml.safe_load(path.read_text())
    par = data.get("parallel_config") or {}
    dp, mp, pp = (int(par.get(k, 1)) for k in ("data_parallel", "model_parallel",
                                                "pipeline_stage"))
    ep = int(par.get("expert_parallel", 1) or 1)
    shipped = (f"dp{dp} mp{mp} pp{pp} mb{par.get('micro_batch_num', 1)}"
               + (f" ep{ep}" if ep > 1 else ""))
    label = f"`{Path(name).stem}`{model_note}"
    model_config = data["model"]["model_config"]
    if "num_attention_heads" not in model_config and name in TEMPLATE_MODELS:
        model_config = yaml.safe_load((CONFIGS / TEMPLATE_MODELS[name]).read_text())["model"][
            "model_config"]
    depth = pp
    rc, out, err = smsg("score", "--mindformers-config", path, "--layers", depth, *SMALL,
                        *heads_of(model_config, mp), "--json", cwd=work)
    if rc and "recompute_config.recompute" in err and "a part cannot be priced" in err:
        # smsg-ms prices all layers recomputed or none: the nearer of the two, said in the row
        flat = json.loads(json.dumps((data.get("recompute_config") or {}).get("recompute")))
        done = sum(int(x) for x in _flat(flat))
        total = int(model_config.get("num_hidden_layers") or 0)
        data["recompute_config"]["recompute"] = 2 * done >= total
        path = work / Path(name).name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        shipped += (f" (recompute {done} of {total} layers priced as "
                    f"{'all' if 2 * done >= total else 'none'})")
        rc, out, err = smsg("score", "--mindformers-config", path, "--layers", depth, *SMALL,
                            *heads_of(model_config, mp), "--json", cwd=work)
    if rc:      # the plan and the compiles may still be made
        shipped += f": score fails: {cell_text(err.removeprefix('smsg-ms: error: '))}"
    expert = json.loads(out) if rc == 0 else None
    sizes = ["--layers", depth, *SMALL, *heads_of(model_config, mp)]
    start = time.monotonic()
    rc, out, err = smsg("plan", "--mindformers-config", path, "--devices", dp * mp * pp,
                        "--pipeline", "auto", *sizes, "--out", work / "p.plan.json", "--json",
                        cwd=work)
    plan_seconds = time.monotonic() - start
    plan = json.loads(out) if rc == 0 else None
    # DeepSeek-V3 refuses fewer layers than its dense ones plus one ("'first_k_dense_replace'(3)
    # should not be bigger than 'num_layers'(2)")
    compiled = max(2, dense_first_layers(model_config) + 1)
    rc, out, err2 = smsg("compare", "--mindformers-config", path, "--layers", compiled, *SMALL,
                         *heads_of(model_config, mp), "--planners", "smsg",
                         "--json", cwd=work)
    counts = {} if rc == 0 else {"expert": f"compare fails: {cell_text(err2)}"}
    if rc == 0:
        for r in json.loads(out)["rows"]:
            counts[r["planner"]] = (r["measures"]["collectives"] if r["ok"] else
                                    "fails: " + cell_text(r["error"] or ""))
    mib = 2 ** 20
    if plan:
        pc = plan["mindformers"]["settings"]["parallel_config"]
        smsg_cell = (f"{plan['totals']['step_seconds']:.4g} s, "
                     f"{plan_memory(plan) / mib:.0f} MiB (dp{pc['data_parallel']} "
                     f"mp{pc['model_parallel']} pp{pc['pipeline_stage']} "
                     f"mb{pc['micro_batch_num']} ep{pc['expert_parallel']}"
                     f"{' sp' if pc.get('use_seq_parallel') else ''}; planned in "
                     f"{plan_seconds:.0f} s)")
    else:
        smsg_cell = f"plan fails: {cell_text(err.removeprefix('smsg-ms: error: '))}"
    if expert and expert.get("step_seconds") is None:     # JSON writes a non-finite step as null
        shipped += ": score gives no finite step (" + cell_text("; ".join(expert.get("notes") or [])
                                                               or "no note") + ")"
    elif expert:
        shipped += f": {expert['step_seconds']:.4g} s, {expert['memory_bytes'] / mib:.0f} MiB"
    return (f"| {label} | {shipped} | {smsg_cell} | {counts.get('expert', '–')} "
            f"| {counts.get('smsg', '–')} |")


def _rows_of(text: str) -> dict:
    """The table's rows in ``text`` by YAML stem."""
    kept = {}
    if BEGIN in text:
        for line in text[text.index(BEGIN):text.index(END)].splitlines():
            if line.startswith("| `"):
                kept[line[3:line.index("`", 3)]] = line
    return kept


def main() -> int:
    base = Path(os.environ.get("TMPDIR", "/tmp")) / "smsg-mf-table"
    header = ["| YAML | shipped configuration: predicted step, memory/device | smsg's plan "
              "(same devices): predicted step, memory/device | collectives, shipped (1 stage) "
              "| collectives, smsg (1 stage) |", "| --- | --- | --- | --- | --- |"]
    doc = ROOT / "docs" / "benchmarks.md"
    wanted = sys.argv[1:]       # YAML stems to redo; the others keep their rows
    kept = _rows_of(doc.read_text())
    made = {}
    for name in YAMLS:
        stem = Path(name).stem
        if wanted and stem not in wanted and stem in kept:
            continue
        work = base / stem      # one folder per YAML: runs for other stems may go on alongside
        work.mkdir(parents=True, exist_ok=True)
        print("…", name, flush=True)
        made[stem] = row(name, work)
        print(made[stem], flush=True)
    # read again: a run for other stems may have written its rows meanwhile
    text = doc.read_text()
    kept = _rows_of(text)
    lines = [*header, *(made.get(Path(n).stem) or kept[Path(n).stem] for n in YAMLS
                        if Path(n).stem in made or Path(n).stem in kept)]
    section = "\n".join([BEGIN, *lines, END])
    if BEGIN in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    tmp = doc.with_suffix(f".md.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
