"""Tables a sweep of the device kernels' candidate launch policies against the default.

usage: sweep.py DEFAULT.json SWEEP.json... [--json OUT.json]

DEFAULT.json is pool_bench_cuda's records (launch_policy), each SWEEP.json a
pool_bench_cuda_<policy>'s, all from one run of tests/gpu/run.sh. Each is set
against the read ceiling its own process measured, so fractions compare across
processes where times would not. A row per method, dtype and shape the candidates
ran; a column per policy; the winner is the policy of the highest fraction, the
default unless a candidate beats it by more than the noise (NOISE).
"""
import argparse
import json

# A candidate must beat the default's fraction by more than two programs that run
# a case alike differ by: about 0.03, 0.07 on `wide`, whose steps last 0.04–0.1 ms.
NOISE = {"wide": 0.07}
DEFAULT_NOISE = 0.03


def key(record):
    return (record["method"], record["dtype"], record["shape"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("default")
    parser.add_argument("sweep", nargs="+")
    parser.add_argument("--json")
    args = parser.parse_args()
    default = {key(r): r for r in json.load(open(args.default)) if r["space"] == "device" and r.get("result", "fp32") == "fp32"}
    candidates = {}
    for path in args.sweep:
        for r in json.load(open(path)):
            if r["space"] == "device" and r.get("result", "fp32") == "fp32":
                candidates.setdefault(r["policy"], {})[key(r)] = r
    policies = sorted(candidates)
    rows = sorted({k for table in candidates.values() for k in table if k in default})
    print("| method | dtype | shape | launch_policy | " + " | ".join(policies) + " | winner |")
    print("|---|---|---|---:|" + "---:|" * len(policies) + "---|")
    winners = []
    for k in rows:
        best_policy, best = "launch_policy", default[k]["fraction"]
        cells = []
        for policy in policies:
            r = candidates[policy].get(k)
            if r is None:
                cells.append("—")
                continue
            cells.append(f"{r['fraction']:.2f}")
            if r["fraction"] > best and r["fraction"] > default[k]["fraction"] + NOISE.get(k[2], DEFAULT_NOISE):
                best_policy, best = policy, r["fraction"]
        winners.append({"method": k[0], "dtype": k[1], "shape": k[2], "policy": best_policy, "fraction": best,
                        "default_fraction": default[k]["fraction"]})
        print(f"| {k[0]} | {k[1]} | {k[2]} | {default[k]['fraction']:.2f} | " + " | ".join(cells) +
              f" | {best_policy} |")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(winners, out, indent=1)
            out.write("\n")


if __name__ == "__main__":
    main()
