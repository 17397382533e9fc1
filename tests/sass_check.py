"""Reads the sm_90 machine code of the device kernels (tests/sass/pool_kernels.cu):
the MEAN and MAX pooling kernels, bf16 and fp32, MEAN from bf16 rows into bf16
results and from fp32 rows into int8 ones, MEAN as the sweep's candidate with two
stages of loads cuts it, the gathering kernel (ALL, STEP) for fp32 and bf16 rows
and bf16 rows into sign bits, the linear layer over pooled rows and over ALL's
bf16 rows where they lie, and the upload of a captured step (copy_pieces, which
reads the pinned slot over the host link).

Every kernel keeps its values in registers: ptxas reports no stack frame and no
spills. Those that read hidden states do so with 128-bit global loads
(LDG.E...128), but for the bf16 gathers, whose lanes load runs of four elements
(64-bit loads) so that each stores 16 bytes of float; the kernel of bf16 results
stores them with 128-bit global stores (STG.E...128). From ptxas's registers and
shared memory it prints, per kernel, the blocks of 256 threads an H100/H200 SM
holds (65,536 registers, 228 KB of shared memory, 64 warps) and the bytes of
global loads an SM can have in flight (what each thread loads before it uses a
loaded value, times the SM's threads; for the kernels that read hidden states,
their streaming loads of those alone), and fails when either falls below what the
kernels have today: a guard of the design for when no GPU is at hand
(docs/PERFORMANCE.md, GPU).

usage: sass_check.py CUOBJDUMP SOURCE OUTDIR -- NVCC [ARGS...]
"""
import os
import pathlib
import re
import subprocess
import sys

DEFAULT, PIPELINED = "13launch_policyE", "22pipelined_loads_policyE"
KERNELS = {
    f"{method} {dtype}": re.compile(rf"pool_rowsINS_6method{code}ENS_4head9normalizeE{mangled}fNS.*{DEFAULT}")
    for method, code in (("mean", "4mean"), ("max", "3max"))
    for dtype, mangled in (("bf16", "13__nv_bfloat16"), ("fp32", "f"))
}
# MEAN as the candidate with two stages of loads (pipelined_loads_policy) cuts it.
for dtype, mangled in (("bf16", "13__nv_bfloat16"), ("fp32", "f")):
    KERNELS[f"mean {dtype} pipelined"] = re.compile(rf"pool_rowsINS_6method4meanENS_4head9normalizeE{mangled}fNS.*{PIPELINED}")
# MEAN of bf16 rows into bf16 results (seqpool::bfloat16).
KERNELS["mean bf16 to bf16"] = re.compile(r"pool_rowsINS_6method4meanENS_4head9normalizeE13__nv_bfloat16NS_8bfloat16E")
# Quantized results, drafted and encoded from the draft: MEAN of fp32 rows into
# int8, ALL's bf16 rows into sign bits (ubinary). They keep their float kin's floors.
KERNELS["mean fp32 to int8"] = re.compile(r"pool_rowsINS_6method4meanENS_4head9normalizeEfaNS")
KERNELS["gather fp32"] = re.compile(r"gather_rowsINS_4head9normalizeEffNS")
KERNELS["gather bf16"] = re.compile(r"gather_rowsINS_4head9normalizeE13__nv_bfloat16fNS")
KERNELS["gather bf16 to ubinary"] = re.compile(r"gather_rowsINS_4head9normalizeE13__nv_bfloat16NS_7ubinaryE")
KERNELS["linear"] = re.compile(r"apply_linearINS_4head9normalizeENS1_16workspace_inputsEfNS")
# The layer's kernel reading ALL's bf16 rows where they lie (a multi-vector projection).
KERNELS["projection bf16"] = re.compile(r"apply_linearINS_4head9normalizeENS1_13returned_rowsI13__nv_bfloat16EEfNS")
KERNELS["copy"] = re.compile(r"copy_pieces")
WIDE_LOADS = [k for k in KERNELS if k not in ("linear", "gather bf16", "gather bf16 to ubinary")]
# The kernels that read hidden states score those loads alone: streaming loads
# (__ldcs, evict-first), not the loads from L2 of their epilogues and merges.
READS_HIDDEN = [k for k in KERNELS if k not in ("linear", "copy")]
STREAMED = ".EF"

# Today's values, the floor each kernel must keep: blocks of 256 threads an SM
# holds, and bytes of loads an SM has in flight (see the docstring).
THREADS = 256
# The dense layer's kernel (a launch a layer of a head's stack, each with a pass
# of its activation function) holds 5 blocks an SM at 48 registers, whether it
# reads pooled rows from the workspace or returned rows where they lie; then it
# reads weights from L2 for a few rows.
BLOCKS_AT_LEAST = {kernel: {"linear": 5, "projection bf16": 5, "copy": 1}.get(kernel, 2) for kernel in KERNELS}
KB = 1024
BYTES_IN_FLIGHT_AT_LEAST = {"mean fp32": 128 * KB, "max fp32": 128 * KB, "mean bf16": 64 * KB, "max bf16": 64 * KB,
                            "mean bf16 to bf16": 64 * KB, "mean fp32 pipelined": 128 * KB,
                            "mean bf16 pipelined": 64 * KB, "gather fp32": 64 * KB, "gather bf16": 32 * KB,
                            "mean fp32 to int8": 128 * KB, "gather bf16 to ubinary": 32 * KB, "copy": 64 * KB,
                            "linear": 100 * KB, "projection bf16": 80 * KB}


def blocks_per_sm(registers, shared_bytes):
    """Blocks of THREADS threads one sm_90 SM holds: registers are given out per
    warp in units of 256, up to 65,536 an SM; 228 KB of shared memory (1 KB of
    it reserved per block); 64 warps."""
    per_warp = -(-registers * 32 // 256) * 256
    by_registers = 65536 // (per_warp * (THREADS // 32))
    by_shared = (228 * 1024) // (shared_bytes + 1024)
    return min(by_registers, by_shared, 64 // (THREADS // 32), 32)


def bytes_before_use(code, kind=""):
    """The most bytes of global loads (those whose modifiers contain `kind`) a
    thread issues before the first instruction that uses a value one of them
    loaded: its loads in flight at once."""
    longest = run = 0
    loaded = set()
    for line in code.splitlines():
        found = re.search(r"LDG\.E((?:\.[A-Z0-9]+)*)\s+(R\d+)", line)
        if found and kind in found.group(1):
            size = re.search(r"\.(64|128)\b", found.group(1))
            width = int(size.group(1) if size else 32) // 8
            run += width
            first = int(found.group(2)[1:])
            loaded.update(f"R{first + k}" for k in range(width // 4))
            continue
        operands = re.findall(r"\bR\d+\b", line.split(";")[0])
        if loaded and any(register in loaded for register in operands[1:]):
            longest = max(longest, run)
            run = 0
            loaded.clear()
    return max(longest, run)


def main():
    cuobjdump, source, outdir = sys.argv[1:4]
    nvcc = sys.argv[sys.argv.index("--") + 1:]
    cubin = pathlib.Path(outdir) / "pool_kernels.cubin"
    built = subprocess.run(nvcc + ["-cubin", "-Xptxas", "-v", source, "-o", str(cubin)],
                           capture_output=True, text=True)
    if built.returncode != 0:
        sys.exit(f"nvcc failed:\n{built.stderr}")
    resources = {}  # kernel -> ptxas's lines after its "Compiling entry function"
    entry = None
    for line in built.stderr.splitlines():
        found = re.search(r"Compiling entry function '([^']+)'", line)
        if found:
            entry = found.group(1)
        elif entry and ("stack frame" in line or "registers" in line):
            resources[entry] = (resources.get(entry, "") + "; " + line.split(":", 1)[-1].strip()).strip("; ")
    # cuobjdump runs nvdisasm, which the PyPI wheels put beside it.
    env = dict(os.environ, PATH=f"{pathlib.Path(cuobjdump).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    sass = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True, check=True, env=env).stdout
    functions = {}  # mangled name -> its instructions
    name = None
    for line in sass.splitlines():
        found = re.search(r"Function : (\S+)", line)
        if found:
            name = found.group(1)
            functions[name] = []
        elif name:
            functions[name].append(line)

    failures = []
    for kernel, pattern in KERNELS.items():
        names = [n for n in functions if pattern.search(n)]
        if len(names) != 1:
            failures.append(f"{kernel}: expected one function, found {len(names)}")
            continue
        code = "\n".join(functions[names[0]])
        wide = len(re.findall(r"LDG\.E[A-Z.]*\.128", code))
        if kernel in WIDE_LOADS and wide == 0:
            failures.append(f"{kernel}: no 128-bit global load")
        if kernel == "gather bf16" and not re.search(r"LDG\.E[A-Z.]*\.64", code):
            failures.append(f"{kernel}: its runs of four bf16 elements are not loaded 8 bytes at a time")
        if kernel.endswith("to bf16") and not re.search(r"STG\.E[A-Z.]*\.128", code):
            failures.append(f"{kernel}: its rounded results are not stored 16 bytes at a time")
        used = resources.get(names[0], "")
        if "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" not in used:
            failures.append(f"{kernel}: local memory used ({used or 'no ptxas report'})")
        registers = int(re.search(r"Used (\d+) registers", used).group(1)) if "registers" in used else 255
        found_shared = re.search(r"(\d+) bytes smem", used)
        blocks = blocks_per_sm(registers, int(found_shared.group(1)) if found_shared else 0)
        in_flight = bytes_before_use(code, STREAMED if kernel in READS_HIDDEN else "") * blocks * THREADS
        if blocks < BLOCKS_AT_LEAST[kernel]:
            failures.append(f"{kernel}: {blocks} blocks an SM, fewer than {BLOCKS_AT_LEAST[kernel]}")
        if in_flight < BYTES_IN_FLIGHT_AT_LEAST.get(kernel, 0):
            failures.append(f"{kernel}: {in_flight // KB} KB of loads in flight an SM, fewer than "
                            f"{BYTES_IN_FLIGHT_AT_LEAST[kernel] // KB}")
        print(f"{kernel}: {wide} 128-bit loads; {registers} registers, {blocks} blocks ({blocks * THREADS // 32} warps) "
              f"an SM, {in_flight // KB} KB of loads in flight an SM; {used}")
    if failures:
        sys.exit("\n".join(failures))


if __name__ == "__main__":
    main()
