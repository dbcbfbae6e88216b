#!/usr/bin/env bash
# Runs GPU test binaries under compute-sanitizer's four tools (memcheck, racecheck, initcheck,
# synccheck) and fails if any reports an error.
#
#   cargo test --release -p zipflow-cuda --no-run      # prints the test binaries it built
#   scripts/gpu-sanitize.sh target/release/deps/zipflow_cuda-HASH target/release/deps/gpu_decode-HASH
#
# Each binary runs single-threaded with ZIPFLOW_REQUIRE_GPU=1, so a missing GPU fails instead of
# skipping. TOOLS="memcheck initcheck" limits the tools; LOGS=DIR keeps each run's log there.
# ZIPFLOW_TPCH_ZF passes through (adds the TPC-H column check; slow under racecheck). Extra
# arguments for the test binaries (a test name filter) go in TEST_ARGS.
#
# initcheck does not follow the bulk copies (cp.async.bulk) that Hopper kernels store with, so
# it would report their output as uninitialised: for initcheck the kernels are generated
# without them (ZIPFLOW_CUDA_NO_BULK=1: every value stored by the threads).
set -uo pipefail
if [ "$#" -eq 0 ]; then
    echo "usage: $0 TEST_BINARY..." >&2
    exit 2
fi
command -v compute-sanitizer >/dev/null || { echo "compute-sanitizer is not on PATH" >&2; exit 2; }
tools=${TOOLS:-memcheck racecheck initcheck synccheck}
logs=${LOGS:-$(mktemp -d)}
mkdir -p "$logs"
export ZIPFLOW_REQUIRE_GPU=1
failed=0
for tool in $tools; do
    for bin in "$@"; do
        name=$(basename "$bin")
        log="$logs/$tool-$name.log"
        start=$(date +%s)
        nobulk=0
        [ "$tool" = initcheck ] && nobulk=1
        # shellcheck disable=SC2086
        ZIPFLOW_CUDA_NO_BULK=$nobulk compute-sanitizer --tool "$tool" --error-exitcode 86 \
            --print-limit 20 "$bin" --test-threads=1 ${TEST_ARGS:-} >"$log" 2>&1
        rc=$?
        # A binary whose tests never touch the GPU is nothing to check, not a failure.
        if [ "$rc" -ne 0 ] && grep -q "terminated before first instrumented API call" "$log"; then
            rc=0
        fi
        summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
        printf '%-10s %-40s rc=%-3s %4ss  %s\n' "$tool" "$name" "$rc" "$(($(date +%s) - start))" "$summary"
        if [ "$rc" -ne 0 ]; then
            failed=1
            grep -m 20 -E "=========|panicked|FAILED" "$log" | head -40
        fi
    done
done
echo "logs: $logs"
exit "$failed"
