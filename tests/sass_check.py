"""Reads the sm_90 machine code of the MEAN and MAX pooling kernels, bf16 and fp32,
and of MEAN from bf16 rows into bf16 results.

Each must load hidden states with 128-bit global loads (LDG.E...128) and keep
its values in registers: ptxas reports no stack frame and no spills. The kernel
of bf16 results must also store them with 128-bit global stores (STG.E...128).

usage: sass_check.py CUOBJDUMP SOURCE OUTDIR -- NVCC [ARGS...]
"""
import os
import pathlib
import re
import subprocess
import sys

KERNELS = {
    f"{method} {dtype}": re.compile(rf"pool_rowsINS_6method{code}ENS_4head5embedE{mangled}fNS")
    for method, code in (("mean", "4mean"), ("max", "3max"))
    for dtype, mangled in (("bf16", "13__nv_bfloat16"), ("fp32", "f"))
}
# MEAN of bf16 rows into bf16 results (seqpool::bfloat16).
KERNELS["mean bf16 to bf16"] = re.compile(r"pool_rowsINS_6method4meanENS_4head5embedE13__nv_bfloat16NS_8bfloat16E")


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
        if wide == 0:
            failures.append(f"{kernel}: no 128-bit global load")
        if kernel.endswith("to bf16") and not re.search(r"STG\.E[A-Z.]*\.128", code):
            failures.append(f"{kernel}: its rounded results are not stored 16 bytes at a time")
        used = resources.get(names[0], "")
        if "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" not in used:
            failures.append(f"{kernel}: local memory used ({used or 'no ptxas report'})")
        print(f"{kernel}: {wide} 128-bit loads; {used}")
    if failures:
        sys.exit("\n".join(failures))


if __name__ == "__main__":
    main()
