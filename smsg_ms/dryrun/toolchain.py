"""MindSpore's own parallel compiler on a CPU machine (the "dry-run").

The PyPI wheel of MindSpore 2.10 ships the GPU plugin; its parallel front end (operator splitting,
tensor redistribution, inserted collectives) runs before any device is touched. This module builds,
once per MindSpore installation, what that plugin needs to load on a machine without CUDA:

1. a fake ``nvcc`` that prints ``release 11.6`` (MindSpore picks the plugin from that line);
2. stub shared libraries, one per CUDA soname the plugin links, exporting every symbol that
   ``objdump -T`` lists as undefined and versioned with that soname (``int f(void){return 100;}``);
3. the environment that makes ``mindspore.communication.init()`` succeed without a launcher
   (``MS_SIMULATION_LEVEL=1``, ``RANK_SIZE``, ``RANK_ID``, ``OMPI_COMMAND=dryrun``, ``PMIX_RANK=0``)
   and stops compilation after the graph passes (``MS_DEV_PRECOMPILE_ONLY=1``).

Source of the recipe: ``shared/docs/mindspore-dryrun.md`` (checked against MindSpore 2.10.0).

Every step that can fail raises :class:`DryRunSetupError` naming the step and what to install.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: CUDA sonames that ``libmindspore_gpu.so.11.6`` links (MindSpore 2.10.0).
CUDA_SONAMES = (
    "libcudart.so.11.0", "libcublas.so.11", "libcudnn.so.8", "libcurand.so.10",
    "libcusolver.so.11", "libcufft.so.10", "libcusparse.so.11", "libnvrtc.so.11.2", "libcuda.so.1",
)
#: Where an unversioned ("Base") undefined symbol of the plugin files lives, by name prefix;
#: ``libcuda_ops.so.11`` links cuBLAS/cuFFT without versions, and the driver API (``cuInit`` …)
#: is unversioned in ``libcuda.so.1``.
_BASE_SYMBOL_HOME = (
    (re.compile(r"^cublas"), "libcublas.so.11"), (re.compile(r"^cufft"), "libcufft.so.10"),
    (re.compile(r"^cudnn"), "libcudnn.so.8"), (re.compile(r"^curand"), "libcurand.so.10"),
    (re.compile(r"^cusolver"), "libcusolver.so.11"), (re.compile(r"^cusparse"), "libcusparse.so.11"),
    (re.compile(r"^nvrtc"), "libnvrtc.so.11.2"), (re.compile(r"^_*cuda"), "libcudart.so.11.0"),
    (re.compile(r"^cu[A-Z]\w*$"), "libcuda.so.1"),
)
_CUDA_RELEASE = "11.6"
SUPPORTED_MINDSPORE = ("2.10.0",)


class DryRunSetupError(RuntimeError):
    """A step of the CPU dry-run set-up failed; the message names the step and the remedy."""

    def __init__(self, step: str, detail: str, remedy: str):
        super().__init__(f"dry-run set-up failed at step '{step}': {detail}. {remedy}")
        self.step = step


@dataclass(frozen=True)
class DryRunToolchain:
    """Paths of a built dry-run toolchain: ``cuda_home`` holds ``bin/nvcc``, ``lib_dir`` the stubs."""

    cuda_home: Path
    lib_dir: Path

    def environment(self, devices: int, rank: int = 0, base: dict | None = None) -> dict:
        """Environment for a child process that compiles as ``rank`` of ``devices`` virtual devices.

        Raises:
            ValueError: ``devices`` < 1 or ``rank`` outside ``[0, devices)``.
        """
        if devices < 1:
            raise ValueError(f"device count must be at least 1, got {devices}")
        if not 0 <= rank < devices:
            raise ValueError(f"rank {rank} is outside 0..{devices - 1}")
        env = dict(os.environ if base is None else base)
        ld = [str(self.lib_dir)] + [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p]
        env.update({
            "CUDA_HOME": str(self.cuda_home),
            "LD_LIBRARY_PATH": ":".join(ld),
            "MS_SIMULATION_LEVEL": "1",
            "RANK_SIZE": str(devices),
            "RANK_ID": str(rank),
            "OMPI_COMMAND": "dryrun",
            "PMIX_RANK": "0",
            "MS_DEV_PRECOMPILE_ONLY": "1",
            "GLOG_v": env.get("GLOG_v", "3"),
            "SMSG_MS_DRYRUN": "1",
        })
        return env


def mindspore_dir() -> Path:
    """Folder of the installed ``mindspore`` package, found without importing it: from the
    installed distribution's files first (independent of ``sys.path`` and of the working
    folder), else by the import system.

    Raises:
        DryRunSetupError: MindSpore is not installed.
    """
    import importlib.metadata

    try:
        folder = Path(str(importlib.metadata.distribution("mindspore").locate_file("mindspore")))
    except importlib.metadata.PackageNotFoundError:
        folder = None
    if folder is not None and (folder / "__init__.py").is_file():
        return folder
    spec = importlib.util.find_spec("mindspore")
    if spec is None or not spec.submodule_search_locations:
        raise DryRunSetupError("find MindSpore", "the package 'mindspore' is not installed",
                               "Install it: pip install mindspore==2.10.0")
    return Path(list(spec.submodule_search_locations)[0])


def _mindspore_version(ms_dir: Path) -> str:
    text = (ms_dir / "version.py").read_text() if (ms_dir / "version.py").exists() else ""
    match = re.search(r"['\"](\d+\.\d+\.\d+[^'\"]*)['\"]", text)
    return match.group(1) if match else "unknown"


def _plugin_files(ms_dir: Path) -> list[Path]:
    plugin = ms_dir / "lib" / "plugin"
    files = sorted(plugin.glob(f"libmindspore_gpu.so.{_CUDA_RELEASE}"))
    files += sorted((plugin / "gpu").glob("*.so*"))
    files += sorted((plugin / f"gpu{_CUDA_RELEASE}").glob("*.so*"))
    if not files or not files[0].name.startswith("libmindspore_gpu"):
        raise DryRunSetupError(
            "find the GPU plugin", f"no libmindspore_gpu.so.{_CUDA_RELEASE} under {plugin}",
            "The dry-run needs the PyPI wheel of mindspore==2.10.0, which ships the GPU plugin")
    return files


def undefined_cuda_symbols(files: list[Path]) -> dict[str, list[str]]:
    """Symbols each CUDA soname must export, read from ``objdump -T`` of the plugin files.

    Returns:
        ``{soname: sorted symbol names}`` for every soname in :data:`CUDA_SONAMES`.

    Raises:
        DryRunSetupError: ``objdump`` is missing or fails.
    """
    if shutil.which("objdump") is None:
        raise DryRunSetupError("read plugin symbols", "objdump was not found",
                               "Install binutils (Debian: apt-get install binutils)")
    wanted = {name: set() for name in CUDA_SONAMES}
    for path in files:
        proc = subprocess.run(["objdump", "-T", str(path)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise DryRunSetupError("read plugin symbols", f"objdump -T {path} failed: "
                                   f"{proc.stderr.strip()[:200]}", "Check that binutils works")
        for line in proc.stdout.splitlines():
            if "*UND*" not in line:
                continue
            fields = line.split()
            symbol = fields[-1]
            version = fields[-2].strip("()")
            if version in wanted:
                wanted[version].add(symbol)
            elif version == "Base":
                home = next((lib for pat, lib in _BASE_SYMBOL_HOME if pat.match(symbol)), None)
                if home is not None:
                    wanted[home].add(symbol)
    return {name: sorted(symbols) for name, symbols in wanted.items()}


def _build_stub(soname: str, symbols: list[str], out_dir: Path) -> None:
    work = out_dir / f".{soname}.build"
    work.mkdir(parents=True, exist_ok=True)
    source = work / "stub.c"
    source.write_text("".join(f"int {s}(void){{return 100;}}\n" for s in symbols) or
                      "int smsg_ms_stub_placeholder(void){return 0;}\n")
    cmd = ["gcc", "-shared", "-fPIC", "-o", str(out_dir / soname), f"-Wl,-soname,{soname}",
           str(source)]
    if soname != "libcuda.so.1" and symbols:
        script = work / "version.map"
        script.write_text(f"{soname} {{ global: {'; '.join(symbols)}; local: *; }};\n")
        cmd.insert(-1, f"-Wl,--version-script={script}")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise DryRunSetupError(f"build stub {soname}", proc.stderr.strip()[:300],
                               "Check that gcc can build shared libraries")
    shutil.rmtree(work)


def cache_root() -> Path:
    """Cache folder: ``$SMSG_MS_CACHE`` or ``~/.cache/smsg-ms``."""
    return Path(os.environ.get("SMSG_MS_CACHE") or Path.home() / ".cache" / "smsg-ms")


def ensure_toolchain() -> DryRunToolchain:
    """Build (first use, a few seconds) or reuse the dry-run toolchain for the installed MindSpore.

    The cache key is the MindSpore version and the plugin file's size and mtime, so another
    MindSpore installation gets its own stubs. The build happens in a temporary folder that is
    renamed into place, so concurrent first uses do not see a half-built toolchain.

    Raises:
        DryRunSetupError: MindSpore missing or unsupported, ``gcc``/``objdump`` missing, a stub
            that does not build.
    """
    ms_dir = mindspore_dir()
    version = _mindspore_version(ms_dir)
    if version not in SUPPORTED_MINDSPORE:
        raise DryRunSetupError(
            "check MindSpore version", f"MindSpore {version} is installed; the dry-run set-up is "
            f"verified for {', '.join(SUPPORTED_MINDSPORE)} only", "pip install mindspore==2.10.0")
    files = _plugin_files(ms_dir)
    stat = files[0].stat()
    key = hashlib.sha256(f"{version}:{files[0]}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    target = cache_root() / "dryrun" / f"ms{version}-{key.hexdigest()[:12]}"
    chain = DryRunToolchain(cuda_home=target / "cuda", lib_dir=target / "cuda" / "lib64")
    if (target / "ok").exists():
        return chain
    if shutil.which("gcc") is None:
        raise DryRunSetupError("build CUDA stubs", "gcc was not found",
                               "Install a C compiler (Debian: apt-get install gcc)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
    try:
        (tmp / "cuda" / "bin").mkdir(parents=True)
        (tmp / "cuda" / "lib64").mkdir(parents=True)
        nvcc = tmp / "cuda" / "bin" / "nvcc"
        nvcc.write_text("#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver (smsg-ms dry-run "
                        f"stand-in)'\necho 'Cuda compilation tools, release {_CUDA_RELEASE}, "
                        f"V{_CUDA_RELEASE}.0'\n")
        nvcc.chmod(0o755)
        symbols = undefined_cuda_symbols(files)
        for soname in CUDA_SONAMES:
            _build_stub(soname, symbols[soname], tmp / "cuda" / "lib64")
        (tmp / "symbols.json").write_text(json.dumps({k: len(v) for k, v in symbols.items()}))
        (tmp / "ok").write_text(version)
        try:
            tmp.rename(target)
        except OSError:
            if not (target / "ok").exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return chain
