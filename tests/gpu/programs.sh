# The programs tests/gpu/run.sh runs, as build-gpu/ builds them; sourced by it
# and by scripts/gather-gpu-deps.sh, which builds them ahead to carry them.
# policies: the sweep's candidate launch policies (detail/device/policy.hpp).
policies=(deep_loads_policy pipelined_loads_policy small_blocks_policy long_tiles_policy wave_tiles_policy
  bulk_rows_policy one_wave_capture_policy whole_image_capture_policy branched_entries_policy)
programs=(tests/test_cuda examples/embed_batch_cuda examples/custom_method_cuda examples/padded_batch_cuda examples/bge_m3_cuda
  tools/seqpool-run-cuda benchmarks/pool_bench_cuda "${policies[@]/#/benchmarks/pool_bench_cuda_}")
# GPU_PROGRAMS, a bash regular expression, keeps only the programs whose paths
# match it, for a call that runs a few parts (with GPU_PARTS): both scripts then
# build, carry and look for those alone.
if [[ -n ${GPU_PROGRAMS:-} ]]; then
  kept=()
  for program in "${programs[@]}"; do
    if [[ $program =~ $GPU_PROGRAMS ]]; then kept+=("$program"); fi
  done
  if ((${#kept[@]} == 0)); then
    echo "GPU_PROGRAMS='$GPU_PROGRAMS' matches none of: ${programs[*]}" >&2
    exit 1
  fi
  programs=("${kept[@]}")
fi
