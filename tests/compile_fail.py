"""Compiles a file that must not compile and checks that the compiler says why.

usage: compile_fail.py EXPECTED SOURCE -- COMPILER [ARGS...]
"""
import subprocess
import sys

expected, source, separator, *compiler = sys.argv[1:]
assert separator == "--", __doc__
run = subprocess.run([*compiler, source], capture_output=True, text=True)
if run.returncode == 0:
    sys.exit(f"{source} compiled, but must not")
if expected not in run.stderr:
    sys.exit(f"the compiler rejected {source} without saying {expected!r}:\n{run.stderr}")
print(f"{source}: rejected with {expected!r}")
