"""Reads the sm_90 machine code of the device kernels (tests/sass/pool_kernels.cu):
the MEAN and MAX pooling kernels, bf16 and fp32, MEAN from bf16 rows into bf16
results and from fp32 rows into int8 ones, MEAN as the sweep's candidate with two
stages of loads cuts it and as the one whose split blocks read rows through rings
that bulk copies fill, the gathering kernel (ALL, STEP) for fp32 and bf16 rows
and bf16 rows into sign bits, the narrow linear layer over pooled rows and over
ALL's bf16 rows where they lie, the wide one's tiles over pooled rows and over
ALL's bf16 and fp32 rows (whose products must keep the next slice's loads in
flight, reading shared memory in vectors), and the upload of a captured step
(copy_pieces, which reads the pinned slot over the host link).

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
kernels have today. For the kernels that read hidden states it follows a block's
path through the data its loads return: the dependent loads that must return
before its first load of hidden states issues, the streaming loads a loop keeps in
flight across its edge, and the dependent loads laid out after the last; none may
grow worse than today's. A guard of the design for when no GPU is at hand
(docs/PERFORMANCE.md, GPU).

usage: sass_check.py CUOBJDUMP SOURCE OUTDIR -- NVCC [ARGS...]
"""
import os
import pathlib
import re
import subprocess
import sys

DEFAULT, PIPELINED, BULK = "13launch_policyE", "22pipelined_loads_policyE", "16bulk_rows_policyE"
KERNELS = {
    f"{method} {dtype}": re.compile(rf"pool_rowsINS_6method{code}ENS_4head9normalizeE{mangled}fNS.*{DEFAULT}")
    for method, code in (("mean", "4mean"), ("max", "3max"))
    for dtype, mangled in (("bf16", "13__nv_bfloat16"), ("fp32", "f"))
}
# MEAN as the candidate with two stages of loads (pipelined_loads_policy) cuts it.
for dtype, mangled in (("bf16", "13__nv_bfloat16"), ("fp32", "f")):
    KERNELS[f"mean {dtype} pipelined"] = re.compile(rf"pool_rowsINS_6method4meanENS_4head9normalizeE{mangled}fNS.*{PIPELINED}")
# MEAN as the candidate whose split blocks read rows through rings in shared
# memory, a warp's ring filled by its lane 0's bulk copies (sm_90's Tensor Memory
# Accelerator: UBLKCP, each completing on an mbarrier the lanes wait on), a row's
# slab a copy: four 1 KB slots a warp for fp32, nine of 512 bytes for bf16
# (tests/cases/bulk_rows.hpp checks the counts), every slot's copy in flight.
# The rings' bytes are the shared memory the kernel takes beyond the default's
# of its dtype, in whole KB (less the line of barriers a ring).
BULK_OF = {"mean fp32 bulk": "mean fp32", "mean bf16 bulk": "mean bf16"}
for dtype, mangled in (("bf16", "13__nv_bfloat16"), ("fp32", "f")):
    KERNELS[f"mean {dtype} bulk"] = re.compile(rf"pool_rowsINS_6method4meanENS_4head9normalizeE{mangled}fNS.*{BULK}")
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
# A wide layer as tiles of rows × outputs (linear_tiles), over pooled rows and
# over ALL's bf16 and fp32 rows where they lie.
KERNELS["tiles"] = re.compile(r"linear_tilesINS_4head9normalizeENS1_16workspace_inputsEfNS")
KERNELS["tiles bf16"] = re.compile(r"linear_tilesINS_4head9normalizeENS1_13returned_rowsI13__nv_bfloat16EEfNS")
KERNELS["tiles fp32"] = re.compile(r"linear_tilesINS_4head9normalizeENS1_13returned_rowsIfEEfNS")
KERNELS["copy"] = re.compile(r"copy_pieces")
WIDE_LOADS = [k for k in KERNELS if k not in ("linear", "gather bf16", "gather bf16 to ubinary", "tiles",
                                              "tiles bf16")]
# The kernels that read hidden states score those loads alone: streaming loads
# (__ldcs, evict-first), not the loads from L2 of their epilogues and merges.
# (The bulk candidate's split blocks read them through its rings instead: scored by those.)
READS_HIDDEN = [k for k in KERNELS if k not in ("linear", "copy", "tiles") and k not in BULK_OF]
TILES = ("tiles", "tiles bf16", "tiles fp32")
# A tile's slice of 16 inputs: a thread's products (4 rows × 8 outputs each),
# whose values it reads from shared memory as 3 vectors an input, all issued
# while its loads of the next slice are in flight.
SLICE_PRODUCTS, SLICE_VECTOR_READS = 16 * 4 * 8, 16 * 3
STREAMED = ".EF"

# Today's values, the floor each kernel must keep: blocks of 256 threads an SM
# holds, and bytes of loads an SM has in flight (see the docstring).
THREADS = 256
# The narrow dense layer's kernel (a launch a layer of a head's stack, each with
# a pass of its activation function) holds 4 blocks an SM at 60 to 64 registers,
# whether it reads pooled rows from the workspace or returned rows where they
# lie; then it reads weights from L2 for a few rows, four a lane in flight. The wide layer's tiles hold
# two (104 to 110 registers, 27 KB of shared memory).
BLOCKS_AT_LEAST = {kernel: {"linear": 4, "projection bf16": 4, "copy": 1}.get(kernel, 2) for kernel in KERNELS}
KB = 1024
BYTES_IN_FLIGHT_AT_LEAST = {"mean fp32": 128 * KB, "max fp32": 128 * KB, "mean bf16": 64 * KB, "max bf16": 64 * KB,
                            "mean bf16 to bf16": 64 * KB, "mean fp32 pipelined": 128 * KB,
                            "mean bf16 pipelined": 64 * KB, "gather fp32": 64 * KB, "gather bf16": 32 * KB,
                            "mean fp32 to int8": 128 * KB, "gather bf16 to ubinary": 32 * KB, "copy": 64 * KB,
                            "linear": 100 * KB, "projection bf16": 64 * KB, "mean fp32 bulk": 128 * KB,
                            "mean bf16 bulk": 64 * KB}
# The bulk candidate's rings an SM: every slot of every warp's ring a copy in flight.
RINGS_AT_LEAST = {"mean fp32 bulk": 64 * KB, "mean bf16 bulk": 72 * KB}


# The path of a block, for the kernels that read hidden states (today's values,
# ceilings or floors): dependent loads that must return before its first load of
# hidden states issues (a warp issues in order: the deepest input of any
# instruction up to it; for the pooling kernels the work record and the header
# side by side, then a packed warp's request entry (a split block's tile), then
# the record it reads the rest from (the common one or its detail; the tile
# names its detail), whose flags the compiler reads before the loop; for the
# layer's kernel over rows where they lie, a row's record, its request's entry,
# then the record that says its columns; the design's goal is one), streaming loads in flight across a
# loop's edge (the candidate with two stages of loads issues the next stage's
# before it adds the one it holds; the default none), and dependent loads laid
# out after the last. The scan is in program order, so a register written on one
# branch counts for the code after it; the dense layer's kernel over rows where
# they lie is scored before its first row alone: what follows is its product
# with the weights, which shared memory (taken as one value) links into one chain.
LOADS_BEFORE_DATA_AT_MOST = {"mean bf16": 3, "max bf16": 3, "mean bf16 pipelined": 3, "mean bf16 to bf16": 3,
                             "mean fp32": 3, "max fp32": 3, "mean fp32 pipelined": 3, "mean fp32 to int8": 3,
                             "gather fp32": 6, "gather bf16": 8, "gather bf16 to ubinary": 8, "projection bf16": 5,
                             "tiles bf16": 5, "tiles fp32": 5}
CARRIED_AT_LEAST = {"mean bf16 pipelined": 8, "mean fp32 pipelined": 12}
TAIL_ROUND_TRIPS_AT_MOST = {"mean bf16": 1, "max bf16": 1, "mean bf16 pipelined": 1, "mean bf16 to bf16": 1,
                            "mean fp32": 1, "max fp32": 1, "mean fp32 pipelined": 1, "mean fp32 to int8": 1,
                            "gather fp32": 3, "gather bf16": 3, "gather bf16 to ubinary": 3}


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


# The SASS as instructions, in program order: address, guard predicate, opcode
# with its modifiers, operands (the first is what it writes, where it writes).
INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z0-9_.]+)\s*([^;]*);")
REGISTER = re.compile(r"\b(U?R\d+|U?P\d+|RZ|PT|URZ|UPT)(\.64)?\b")
WRITES_NOTHING = {"ST", "STG", "STS", "STL", "BRA", "EXIT", "BAR", "RED", "REDG", "MEMBAR", "BSYNC", "BSSY",
                  "WARPSYNC", "NOP", "CALL", "RET", "YIELD", "DEPBAR", "ERRBAR", "CCTL", "FENCE"}


def instructions(code):
    found = []
    for line in code.splitlines():
        match = INSTRUCTION.search(line)
        if match:
            operands = [o.strip() for o in match.group(4).split(",")] if match.group(4).strip() else []
            found.append((int(match.group(1), 16), (match.group(2) or "").strip().lstrip("@!"), match.group(3),
                          operands))
    return found


def registers(operand, count=1):
    """The registers an operand names: a pair for R2.64, `count` from its first otherwise."""
    named = []
    for name, pair in REGISTER.findall(operand):
        if name in ("RZ", "PT", "URZ", "UPT"):
            continue
        kind = re.match(r"[A-Z]+", name).group(0)
        first = int(name[len(kind):])
        named += [f"{kind}{first + k}" for k in range(2 if pair else count)]
    return named


def is_global_load(opcode):
    return opcode.split(".")[0] in ("LDG", "LD", "ATOMG", "ATOM")


def is_streamed(opcode):
    return opcode.startswith("LDG") and STREAMED in opcode


def written_and_read(instruction):
    """The registers and predicates an instruction writes and those it reads.
    It writes its first operand; a compare (…SETP, PLOP3) its first two
    predicates; a shuffle or an atomic its predicate and then its register; an
    instruction that writes a register, the carries out that follow it
    (IADD3 R8, P3, P4, …)."""
    _, guard, opcode, operands = instruction
    read = registers(guard)
    base = opcode.split(".")[0]
    if base in WRITES_NOTHING or not operands:
        return [], read + [r for o in operands for r in registers(o)]
    size = re.search(r"\.(64|128)\b", opcode)
    count = int(size.group(1)) // 32 if size and opcode.startswith(("LD", "ATOM")) else (
        2 if ".WIDE" in opcode or ".64" in opcode else 1)
    is_predicate = lambda operand: re.fullmatch(r"U?P(\d+|T)", operand) is not None
    if base.endswith("SETP") or base == "PLOP3" or base.startswith(("SHFL", "ATOM")):
        written = 2
    else:
        written = 1
        while written < len(operands) and is_predicate(operands[written]):
            written += 1
    destinations = [r for o in operands[:written] for r in registers(o, 1 if is_predicate(o) else count)]
    return destinations, read + [r for o in operands[written:] for r in registers(o)]


def load_depths(code_list, begin=0):
    """For each instruction from `begin`, the global loads that must return, one
    after another, before its inputs are known: along registers and predicates,
    shared memory taken as one value (a load from it waits for every store to it
    before), kernel parameters (the constant bank) free; each loop's body counted once."""
    depth, shared, found = {}, 0, []
    for instruction in code_list[begin:]:
        written, read = written_and_read(instruction)
        opcode = instruction[2]
        inputs = max([depth.get(r, 0) for r in read] or [0])
        if opcode.startswith("LDS"):
            inputs = max(inputs, shared)
        if opcode.startswith("STS"):
            shared = max(shared, inputs)
        found.append((instruction, inputs))
        for register in written:
            depth[register] = inputs + (1 if is_global_load(opcode) else 0)
    return found


def streamed_range(code_list):
    """The indices of the first and the last streaming load of hidden states, in program order."""
    found = [k for k, (_, _, opcode, _) in enumerate(code_list) if is_streamed(opcode)]
    if not found:
        raise LookupError("no streaming load of hidden states (LDG.E.EF)")
    return found[0], found[-1]


def loads_before_data(code_list):
    """Dependent global loads that must return before the first streaming load
    of hidden states (in program order) issues: a warp issues in order, so the
    deepest of every instruction up to it, not only of its address. What the
    plan's records cost a block before its first data load."""
    first, _ = streamed_range(code_list)
    return max(inputs for _, inputs in load_depths(code_list)[:first + 1])


def tail_round_trips(code_list):
    """Dependent global loads (and atomics) laid out after the last streaming
    load of hidden states, in program order, each loop's body once: the merges'
    and epilogues' chains of loads that follow the streaming there. (Arrival
    counters a compiler lays out before that load, and what depends on them
    only through a branch, it does not see.)"""
    _, last = streamed_range(code_list)
    found = load_depths(code_list, last + 1)
    return max([inputs + 1 for (_, _, opcode, _), inputs in found if is_global_load(opcode)] or [0])


def carried_loads(code_list):
    """Streaming loads inside a loop whose value its iteration does not use
    before the loop's back-edge — loads issued for the next stage, in flight
    across the loop's edge — and all streaming loads inside loops."""
    # Branches laid out past the last EXIT are stubs (BRA.DIV), not loops.
    end = max([k for k, (_, _, opcode, _) in enumerate(code_list) if opcode.startswith("EXIT")] or [len(code_list)])
    loops = []  # (first, back-edge) index pairs of backward branches
    for k, (address, _, opcode, operands) in enumerate(code_list[:end]):
        target = re.search(r"0x([0-9a-f]+)", operands[-1]) if opcode.startswith("BRA") and operands else None
        if target and int(target.group(1), 16) <= address:
            first = next(j for j, other in enumerate(code_list) if other[0] >= int(target.group(1), 16))
            loops.append((first, k))
    accesses = [written_and_read(instruction) for instruction in code_list]
    carried = total = 0
    for k, instruction in enumerate(code_list):
        inner = [loop for loop in loops if loop[0] <= k <= loop[1]]
        if not is_streamed(instruction[2]) or not inner:
            continue
        _, edge = min(inner, key=lambda loop: loop[1] - loop[0])
        loaded = set(accesses[k][0])
        used = any(loaded & set(read) for _, read in accesses[k + 1:edge + 1])
        total += 1
        carried += 0 if used else 1
    return carried, total


def products_under_load(code_list, counted):
    """For the global load (of those `counted` takes) with the most work
    behind it, the products (FFMA) and the 128-bit shared-memory reads
    (LDS.128) a thread issues between the load and the first instruction that
    reads what it loaded, following unconditional branches: the multiply a
    tile's slice keeps its loads of the next slice in flight across."""
    accesses = [written_and_read(instruction) for instruction in code_list]
    index_of = {address: k for k, (address, _, _, _) in enumerate(code_list)}
    best = (0, 0)
    for k, (_, _, opcode, _) in enumerate(code_list):
        if not counted(opcode):
            continue
        loaded, products, vectors, j, seen = set(accesses[k][0]), 0, 0, k + 1, set()
        while j < len(code_list) and j not in seen and not loaded & set(accesses[j][1]):
            seen.add(j)
            _, guard, other, operands = code_list[j]
            if other.startswith("EXIT") and not guard:
                break
            target = re.search(r"0x([0-9a-f]+)", operands[-1]) if other.startswith("BRA") and operands else None
            if target and not guard and int(target.group(1), 16) in index_of:
                j = index_of[int(target.group(1), 16)]
                continue
            products += other.startswith("FFMA")
            vectors += other.startswith("LDS.128")
            j += 1
        best = max(best, (products, vectors))
    return best


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
    shared_of = {}  # kernel -> its static shared memory, in bytes
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
        shared_of[kernel] = int(found_shared.group(1)) if found_shared else 0
        path_figures = ""
        if kernel in BULK_OF:
            if not re.search(r"UBLKCP", code) or not re.search(r"SYNCS\.PHASECHK", code):
                failures.append(f"{kernel}: no bulk copy (UBLKCP) or no wait on an mbarrier's phase (SYNCS.PHASECHK)")
            rings = (shared_of[kernel] - shared_of.get(BULK_OF[kernel], 0)) // KB * KB * blocks
            if rings < RINGS_AT_LEAST[kernel]:
                failures.append(f"{kernel}: {rings // KB} KB of rings an SM, fewer than {RINGS_AT_LEAST[kernel] // KB}")
            path_figures = f"; {rings // KB} KB of rings of bulk copies an SM"
        if kernel in TILES:
            # Over rows where they lie, the streaming load of the next slice's
            # hidden states; over pooled rows, any load.
            products, vectors = products_under_load(
                instructions(code), is_streamed if kernel in READS_HIDDEN else lambda op: op.startswith(("LDG", "LD.")))
            if products < SLICE_PRODUCTS or vectors < SLICE_VECTOR_READS:
                failures.append(f"{kernel}: {products} products and {vectors} vector reads of shared memory under a "
                                f"load, fewer than a slice's {SLICE_PRODUCTS} and {SLICE_VECTOR_READS}")
            path_figures = f"; {products} products and {vectors} vector reads of shared memory under a load"
        if kernel in READS_HIDDEN:
            code_list = instructions(code)
            try:
                before, (carried, looped) = loads_before_data(code_list), carried_loads(code_list)
            except LookupError as missing:
                failures.append(f"{kernel}: {missing}")
                continue
            tail = tail_round_trips(code_list) if kernel in TAIL_ROUND_TRIPS_AT_MOST else None
            if before > LOADS_BEFORE_DATA_AT_MOST[kernel]:
                failures.append(f"{kernel}: {before} dependent loads before the first load of hidden states, more "
                                f"than {LOADS_BEFORE_DATA_AT_MOST[kernel]}")
            if tail is not None and tail > TAIL_ROUND_TRIPS_AT_MOST[kernel]:
                failures.append(f"{kernel}: {tail} dependent loads after the last load of hidden states, more than "
                                f"{TAIL_ROUND_TRIPS_AT_MOST[kernel]}")
            if carried < CARRIED_AT_LEAST.get(kernel, 0):
                failures.append(f"{kernel}: {carried} streaming loads in flight across a loop's edge, fewer than "
                                f"{CARRIED_AT_LEAST[kernel]}")
            path_figures += (f"; {before} dependent loads before the first data load, {carried} of {looped} looped "
                            f"streaming loads carried across the edge" +
                            ("" if tail is None else f", {tail} after the last"))
        print(f"{kernel}: {wide} 128-bit loads; {registers} registers, {blocks} blocks ({blocks * THREADS // 32} warps) "
              f"an SM, {in_flight // KB} KB of loads in flight an SM{path_figures}; {used}")
    if failures:
        sys.exit("\n".join(failures))


if __name__ == "__main__":
    main()
