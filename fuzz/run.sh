#!/usr/bin/env bash
# Runs the fuzz targets for a given time each, from their seeds.
#
#   fuzz/run.sh [SECONDS] [TARGET...]     # default: 60 s each, every target
#
# Needs the nightly toolchain and cargo-fuzz (installed here if missing). Corpora grow in
# fuzz/corpus/TARGET (not committed); the small seeds in fuzz/seeds/TARGET are (and the whole-file targets start from
# crates/zipflow-format/tests/golden). Crashes land in
# fuzz/artifacts/TARGET and stop that target's run; the script exits non-zero if any target
# crashed. Targets:
#   decode_node          arbitrary bytes as one encoded tree
#   parse_plan           arbitrary plan text
#   read_file            arbitrary bytes as a .zf file (stops mostly at the checksums)
#   read_file_resealed   a mutated .zf file with every checksum recomputed: reaches the footer
#                        parser and the decoders
#   plan_roundtrip       arbitrary values and plans: exact round trip, then mutated trees
#   sql                  arbitrary SQL text on a small table; block path against reference path
set -uo pipefail
cd "$(dirname "$0")"
secs=${1:-60}
shift || true
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
    targets=(decode_node parse_plan read_file read_file_resealed plan_roundtrip sql)
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked || exit 2
if [ ! -d corpus/decode_node ]; then
    cargo +nightly run --release --bin seed_corpus -- corpus/decode_node || exit 2
fi
failed=0
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    dirs=("corpus/$t")
    [ -d "seeds/$t" ] && dirs+=("seeds/$t")
    # The whole-file targets start from the golden files of the format's tests.
    case "$t" in read_file*) dirs+=(../crates/zipflow-format/tests/golden) ;; esac
    echo "== $t for ${secs}s"
    if ! cargo +nightly fuzz run "$t" "${dirs[@]}" -- -max_total_time="$secs" \
        -rss_limit_mb=4096 -print_final_stats=1 2>&1 | tee "/tmp/fuzz-$t.log" | grep -E "^#[0-9]+ +DONE|cov:|stat::|SUMMARY|panicked" | tail -4; then
        failed=1
    fi
    if grep -q "ERROR: libFuzzer\|panicked at" "/tmp/fuzz-$t.log"; then
        echo "$t: crashed (see /tmp/fuzz-$t.log and fuzz/artifacts/$t)"
        failed=1
    fi
done
exit "$failed"
