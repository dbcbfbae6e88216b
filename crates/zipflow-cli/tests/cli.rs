//! The `zipflow` command as a user runs it: round trips through every output format, refusals,
//! and one-line errors on damaged files and unsupported inputs.

use arrow::array::{
    Array, ArrayRef, Date32Array, Decimal128Array, Float64Array, Int64Array, ListArray,
    RecordBatch, StringArray,
};
use arrow::datatypes::{DataType, Field, Int32Type, Schema};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

fn zipflow(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zipflow"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("running zipflow: {e}"))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `zipflow compress in.parquet -o t.zf -q` with `extra` arguments, in `d`; it must succeed.
fn compress_table(d: &Path, extra: &[&str]) {
    let mut args = vec!["compress", "in.parquet", "-o", "t.zf", "-q"];
    args.extend_from_slice(extra);
    let o = zipflow(&args, d);
    assert!(o.status.success(), "{}", stderr(&o));
}

fn sample_batch(rows: usize) -> RecordBatch {
    let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(
        (0..rows as i64).map(|i| i * 3),
    ));
    let price: ArrayRef = Arc::new(
        Decimal128Array::from_iter(
            (0..rows).map(|i| (i % 9 != 4).then_some((i * 7919 % 100_000) as i128)),
        )
        .with_precision_and_scale(15, 2)
        .unwrap_or_else(|e| panic!("{e}")),
    );
    let day: ArrayRef = Arc::new(Date32Array::from_iter_values(
        (0..rows as i32).map(|i| 9000 + i % 2500),
    ));
    let x: ArrayRef = Arc::new(Float64Array::from_iter((0..rows).map(|i| {
        if i % 11 == 0 {
            None
        } else {
            Some(i as f64 / 8.0 - 3.0)
        }
    })));
    let s: ArrayRef = Arc::new(StringArray::from_iter(
        (0..rows).map(|i| (i % 5 != 0).then(|| format!("item-{}", i % 17))),
    ));
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("price", DataType::Decimal128(15, 2), true),
        Field::new("day", DataType::Date32, false),
        Field::new("x", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
    ]);
    RecordBatch::try_new(Arc::new(schema), vec![ids, price, day, x, s])
        .unwrap_or_else(|e| panic!("{e}"))
}

fn write_parquet(path: &Path, batch: &RecordBatch) {
    let f = File::create(path).unwrap_or_else(|e| panic!("{e}"));
    let mut w = ArrowWriter::try_new(f, batch.schema(), None).unwrap_or_else(|e| panic!("{e}"));
    w.write(batch).unwrap_or_else(|e| panic!("{e}"));
    w.close().unwrap_or_else(|e| panic!("{e}"));
}

fn read_parquet(path: &Path) -> RecordBatch {
    let f = File::open(path).unwrap_or_else(|e| panic!("{e}"));
    let r = ParquetRecordBatchReaderBuilder::try_new(f)
        .and_then(|b| b.build())
        .unwrap_or_else(|e| panic!("{e}"));
    let batches: Vec<RecordBatch> = r.map(|b| b.unwrap_or_else(|e| panic!("{e}"))).collect();
    let schema = batches[0].schema();
    arrow::compute::concat_batches(&schema, &batches).unwrap_or_else(|e| panic!("{e}"))
}

fn setup(rows: usize) -> (tempfile::TempDir, PathBuf, RecordBatch) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let batch = sample_batch(rows);
    let input = dir.path().join("in.parquet");
    write_parquet(&input, &batch);
    (dir, input, batch)
}

#[test]
fn parquet_round_trip_is_identical() {
    let (dir, _, batch) = setup(70_000);
    let d = dir.path();
    compress_table(d, &["--chunk-rows", "8192"]);
    let o = zipflow(&["decompress", "t.zf", "-o", "back.parquet", "-q"], d);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read_parquet(&d.join("back.parquet")), batch);
    for out in ["back.csv", "back.arrow"] {
        let o = zipflow(&["decompress", "t.zf", "-o", out, "-q"], d);
        assert!(o.status.success(), "{out}: {}", stderr(&o));
    }
    let f = File::open(d.join("back.arrow")).unwrap_or_else(|e| panic!("{e}"));
    let r = arrow::ipc::reader::FileReader::try_new(f, None).unwrap_or_else(|e| panic!("{e}"));
    let back: Vec<RecordBatch> = r.map(|b| b.unwrap_or_else(|e| panic!("{e}"))).collect();
    let back =
        arrow::compute::concat_batches(&back[0].schema(), &back).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back, batch);
    // Arrow IPC in: the same table again.
    let o = zipflow(&["compress", "back.arrow", "-o", "ipc.zf", "-q"], d);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = zipflow(&["decompress", "ipc.zf", "-o", "ipc.parquet", "-q"], d);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read_parquet(&d.join("ipc.parquet")), batch);
    // The CSV comes back in as the same table, types inferred.
    let o = zipflow(&["compress", "back.csv", "-o", "csv.zf", "-q"], d);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = zipflow(&["inspect", "csv.zf"], d);
    assert!(String::from_utf8_lossy(&o.stdout).contains("70000 rows"));
}

#[test]
fn inspect_shows_plans_sizes_and_zone_maps() {
    let (dir, _, _) = setup(5000);
    let d = dir.path();
    compress_table(d, &["--plan", "id=delta | for | bitpack"]);
    let o = zipflow(&["inspect", "t.zf", "--chunks"], d);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("5000 rows, 5 columns"), "{out}");
    assert!(out.contains("delta | for | bitpack(2)"), "{out}");
    assert!(
        out.contains("1994-08-23"),
        "date zone map shown as a date: {out}"
    );
    assert!(out.contains("ratio"), "{out}");
}

#[test]
fn gpu_source_prints_the_generated_kernels_without_a_gpu() {
    let (dir, _, _) = setup(5000);
    let d = dir.path();
    let plans = [
        "--plan",
        "id=delta | for | bitpack",
        "--plan",
        "s=strdict(codes: bitpack)",
    ];
    compress_table(d, &plans);
    let o = zipflow(&["gpu", "source", "t.zf", "--column", "id"], d);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("1 of 1 chunks have plan shape"), "{out}");
    assert!(out.contains("delta:i64(for:i64(bitpack(2):u64))"), "{out}");
    assert!(out.contains("zf_decode(const u8* __restrict__ in"), "{out}");
    // A string column has its expansion kernel too; --out writes files, once.
    std::fs::create_dir(d.join("cu")).unwrap_or_else(|e| panic!("{e}"));
    let args = ["gpu", "source", "t.zf", "--column", "s", "--out", "cu"];
    let o = zipflow(&args, d);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(d.join("cu/s.0.cu")).unwrap_or_else(|e| panic!("{e}"));
    assert!(text.contains("zf_expand("), "{text}");
    let o = zipflow(&args, d);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--force"), "{}", stderr(&o));
    let o = zipflow(&["gpu", "source", "t.zf", "--column", "nope"], d);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("no column `nope` (columns: id, price, day, x, s)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn existing_output_needs_force() {
    let (dir, _, _) = setup(100);
    let d = dir.path();
    std::fs::write(d.join("t.zf"), b"keep me").unwrap_or_else(|e| panic!("{e}"));
    let o = zipflow(&["compress", "in.parquet", "-o", "t.zf", "-q"], d);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--force"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(d.join("t.zf")).ok(),
        Some(b"keep me".to_vec())
    );
    let o = zipflow(
        &["compress", "in.parquet", "-o", "t.zf", "-q", "--force"],
        d,
    );
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn damaged_files_fail_in_one_line_and_write_nothing() {
    let (dir, _, _) = setup(50_000);
    let d = dir.path();
    compress_table(d, &["--chunk-rows", "4096"]);
    let good = std::fs::read(d.join("t.zf")).unwrap_or_else(|e| panic!("{e}"));

    let mut flipped = good.clone();
    flipped[good.len() / 3] ^= 0x04;
    std::fs::write(d.join("flip.zf"), &flipped).unwrap_or_else(|e| panic!("{e}"));
    let o = zipflow(&["decompress", "flip.zf", "-o", "out.parquet", "-q"], d);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    assert!(
        e.contains("flip.zf") && e.contains("column `") && e.contains("chunk "),
        "{e}"
    );
    assert!(!d.join("out.parquet").exists());

    std::fs::write(d.join("cut.zf"), &good[..good.len() - 1000]).unwrap_or_else(|e| panic!("{e}"));
    let o = zipflow(&["decompress", "cut.zf", "-o", "out.parquet", "-q"], d);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("cut.zf") && e.contains("truncated"), "{e}");
    assert!(!d.join("out.parquet").exists());
    let leftovers: Vec<_> = std::fs::read_dir(d)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[test]
fn unsupported_types_and_bad_plans_are_named() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let d = dir.path();
    let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![Some(1)]), None]);
    let schema = Schema::new(vec![Field::new("tags", list.data_type().clone(), true)]);
    let batch = RecordBatch::try_new(Arc::new(schema), vec![Arc::new(list)])
        .unwrap_or_else(|e| panic!("{e}"));
    write_parquet(&d.join("list.parquet"), &batch);
    let o = zipflow(&["compress", "list.parquet", "-o", "l.zf", "-q"], d);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("column `tags`") && stderr(&o).contains("List"),
        "{}",
        stderr(&o)
    );
    assert!(!d.join("l.zf").exists());

    write_parquet(&d.join("in.parquet"), &sample_batch(10));
    let o = zipflow(
        &["compress", "in.parquet", "-o", "x.zf", "--plan", "id=for |"],
        d,
    );
    assert!(
        stderr(&o).contains("expected a primitive name"),
        "{}",
        stderr(&o)
    );
    let o = zipflow(
        &[
            "compress",
            "in.parquet",
            "-o",
            "x.zf",
            "--plan",
            "nope=bitpack",
        ],
        d,
    );
    assert!(
        stderr(&o).contains("nope") && stderr(&o).contains("id"),
        "{}",
        stderr(&o)
    );
    let o = zipflow(
        &[
            "compress",
            "in.parquet",
            "-o",
            "x.zf",
            "--plan",
            "s=bitpack",
        ],
        d,
    );
    assert!(stderr(&o).contains("column `s`"), "{}", stderr(&o));
    assert!(!d.join("x.zf").exists());
}

#[test]
fn empty_tables_round_trip() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let d = dir.path();
    std::fs::write(d.join("h.csv"), "a,b\n").unwrap_or_else(|e| panic!("{e}"));
    let o = zipflow(&["compress", "h.csv", "-o", "h.zf", "-q"], d);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = zipflow(&["decompress", "h.zf", "-o", "back.csv", "-q"], d);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_to_string(d.join("back.csv")).ok().as_deref(),
        Some("a,b\n")
    );
}

#[test]
fn tpch_main_job_runs_small() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let o = zipflow(&["tpch", "--sf", "0.01", "-q", "--no-parquet"], dir.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("every value round-trips"), "{out}");
    assert!(out.contains("l_extendedprice"), "{out}");
}

#[test]
fn gpu_bench_runs_or_says_there_is_no_gpu_in_one_line() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let o = zipflow(&["bench", "gpu", "--sf", "0.0"], dir.path());
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--sf must be in (0, 1000]"),
        "{}",
        stderr(&o)
    );
    let args = [
        "bench",
        "gpu",
        "--sf",
        "0.01",
        "--reps",
        "1",
        "--fusion-rows",
        "0",
        "-q",
    ];
    let o = zipflow(&args, dir.path());
    let err = stderr(&o);
    if o.status.success() {
        // A GPU: every column decoded and checked against the CPU.
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("bit-identical to the CPU"), "{out}");
    } else {
        assert!(
            err.starts_with("error: ") && err.contains("no usable GPU"),
            "{err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    // A block size the chunk kernels do not take is refused before a GPU is looked for.
    let o = zipflow(&["gpu", "fusion", "--chunk-threads", "300"], dir.path());
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("possible values: 128, 256, 512"),
        "{}",
        stderr(&o)
    );
    // Nothing left behind in the working directory.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap_or_else(|e| panic!("{e}"))
        .collect();
    assert!(left.is_empty());
}

#[test]
fn text_mode_gives_back_the_exact_bytes() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut data = b"It was the best of times, it was the worst of times; ".repeat(2000);
    data.extend((0..=255u8).cycle().take(5000));
    std::fs::write(dir.path().join("book.txt"), &data).unwrap_or_else(|e| panic!("{e}"));
    for plan in [
        None,
        Some("chardict16"),
        Some("words(codes: ans)"),
        Some("text=fsst"),
    ] {
        let mut args = vec!["compress", "--text", "book.txt", "-o", "b.zf", "-f", "-q"];
        if let Some(p) = plan {
            args.extend(["--plan", p]);
        }
        let o = zipflow(&args, dir.path());
        assert!(o.status.success(), "{plan:?}: {}", stderr(&o));
        let o = zipflow(
            &["decompress", "b.zf", "-o", "back.txt", "-f", "-q"],
            dir.path(),
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let back = std::fs::read(dir.path().join("back.txt")).unwrap_or_default();
        assert!(back == data, "{plan:?}: bytes differ");
    }
    let o = zipflow(&["inspect", "b.zf"], dir.path());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains("--text") && out.contains("fsst"),
        "{out}"
    );
    // A bad plan is named and leaves nothing.
    let o = zipflow(
        &[
            "compress",
            "--text",
            "book.txt",
            "-o",
            "bad.zf",
            "--plan",
            "bitpack(3)",
        ],
        dir.path(),
    );
    assert!(
        !o.status.success() && stderr(&o).contains("bitpack"),
        "{}",
        stderr(&o)
    );
    assert!(!dir.path().join("bad.zf").exists());
}

#[test]
fn invalid_utf8_in_csv_names_line_and_column() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // Early (seen while inferring the schema) and late (seen while reading).
    let early = b"id,name\n1,ok\n2,caf\xe9\n".to_vec();
    let mut late = b"id,name\n".to_vec();
    for i in 0..150_000 {
        late.extend_from_slice(format!("{i},n{i}\n").as_bytes());
    }
    late.extend_from_slice(b"7,caf\xe9\n");
    for (file, line) in [("early.csv", "line 3"), ("late.csv", "line 150002")] {
        let data = if file == "early.csv" { &early } else { &late };
        std::fs::write(dir.path().join(file), data).unwrap_or_else(|e| panic!("{e}"));
        let o = zipflow(&["compress", file, "-o", "x.zf", "-q"], dir.path());
        let err = stderr(&o);
        assert!(!o.status.success(), "{file}");
        assert!(
            err.contains(file) && err.contains(line) && err.contains("column `name`"),
            "{err}"
        );
        assert!(err.trim().lines().count() == 1, "{err}");
        assert!(!dir.path().join("x.zf").exists());
    }
}

/// `zipflow raster compress` and `zipflow raster ndvi` as a user runs them: two TIFF bands
/// (a partial last vector, no-data pixels, bright outliers), each op's answer checked against
/// the exact one, and the refusals.
#[test]
fn raster_bands_compress_and_aggregate() {
    use zipflow_compute::raster::{Raster, write_tiff};
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let d = dir.path();
    let (w, h) = (301u32, 211u32);
    let band = |f: &dyn Fn(u32, u32) -> u16| -> Vec<u16> {
        (0..h)
            .flat_map(|y| (0..w).map(move |x| (x, y)))
            .map(|(x, y)| f(x, y))
            .collect()
    };
    let nir = band(&|x, y| match (x * 31 + y * 17) % 997 {
        0 => 0,
        1 => 60_000,
        v => 1500 + (v as u16) * 3,
    });
    let red = band(&|x, y| match (x * 13 + y * 7) % 991 {
        0 => 0,
        v => 300 + (v as u16) * 2,
    });
    for (name, pixels) in [("nir.tif", &nir), ("red.tif", &red)] {
        let r = Raster::new(w, h, pixels.clone()).unwrap_or_else(|e| panic!("{e}"));
        write_tiff(&r, d.join(name)).unwrap_or_else(|e| panic!("{e}"));
    }
    // The default plan for one band, another fused plan for the other.
    let o = zipflow(&["raster", "compress", "nir.tif", "-o", "nir.zf"], d);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = zipflow(
        &[
            "raster",
            "compress",
            "red.tif",
            "-o",
            "red.zf",
            "--plan",
            "for | bitpack",
        ],
        d,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let pairs = || {
        nir.iter()
            .zip(&red)
            .map(|(&n, &r)| (f64::from(n), f64::from(r)))
    };
    let sum_nr: u64 = nir
        .iter()
        .zip(&red)
        .map(|(&n, &r)| u64::from(n) + u64::from(r))
        .sum();
    let count = pairs().filter(|&(n, r)| (n - r) / (n + r) > 0.3).count();
    let sum: f64 = pairs()
        .filter(|&(n, r)| n + r > 0.0)
        .map(|(n, r)| (n - r) / (n + r))
        .sum();
    let ndvi = |op: &[&str]| -> String {
        let mut args = vec!["raster", "ndvi", "--nir", "nir.zf", "--red", "red.zf"];
        args.extend_from_slice(op);
        let o = zipflow(&args, d);
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let answer = |out: &str| -> String {
        let line = out.lines().next().unwrap_or_default();
        let after = line.split(" = ").nth(1).unwrap_or_default();
        after
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(answer(&ndvi(&["--op", "sum-nr"])), sum_nr.to_string());
    assert_eq!(
        answer(&ndvi(&["--op", "count", "--t", "0.3"])),
        count.to_string()
    );
    for op in ["sum", "sum-recip", "sum-newton"] {
        let got: f64 = answer(&ndvi(&["--op", op, "--threads", "2"]))
            .parse()
            .unwrap_or_else(|e| panic!("{op}: {e}"));
        assert!(
            (got - sum).abs() < 1e-4 * nir.len() as f64,
            "{op}: {got} vs {sum}"
        );
    }
    let with_data = pairs().filter(|&(n, r)| n + r > 0.0).count();
    let out = ndvi(&["--op", "sum"]);
    assert!(out.contains(&format!("{with_data} with data")), "{out}");
    // Compressed and tiled GeoTIFFs of other sample types, their no-data values kept.
    let fixtures =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../zipflow-compute/tests/data/raster");
    for (name, says) in [
        ("u16_lzw_cog.tif", "u16 pixels (no data: 0)"),
        ("f32_deflate_tiled.tif", "f32 pixels (no data: nan)"),
        ("i16_zstd_strips.tif", "i16 pixels (no data: -9999)"),
    ] {
        let input = fixtures.join(name);
        let input = input.to_string_lossy();
        let o = zipflow(
            &["raster", "compress", &input, "-o", "fixture.zf", "--force"],
            d,
        );
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains(&format!("97 x 61 {says}")), "{name}: {out}");
    }
    // Refusals: an existing output, a file that is not a TIFF (nothing written), bands of
    // different sizes, an unknown op; each fails with `needle` in its message.
    let refused = |args: &[&str], needle: &str| {
        let o = zipflow(args, d);
        assert!(
            !o.status.success() && stderr(&o).contains(needle),
            "{}",
            stderr(&o)
        );
    };
    refused(
        &["raster", "compress", "nir.tif", "-o", "nir.zf"],
        "--force",
    );
    std::fs::write(d.join("not.tif"), b"not a tiff").unwrap_or_else(|e| panic!("{e}"));
    refused(
        &["raster", "compress", "not.tif", "-o", "not.zf"],
        "not.tif",
    );
    assert!(!d.join("not.zf").exists());
    let small = Raster::new(10, 10, vec![7; 100]).unwrap_or_else(|e| panic!("{e}"));
    write_tiff(&small, d.join("small.tif")).unwrap_or_else(|e| panic!("{e}"));
    let o = zipflow(&["raster", "compress", "small.tif", "-o", "small.zf"], d);
    assert!(o.status.success(), "{}", stderr(&o));
    let ndvi = ["raster", "ndvi", "--nir", "nir.zf", "--red"];
    refused(
        &[&ndvi[..], &["small.zf", "--op", "sum"]].concat(),
        "differ",
    );
    refused(&[&ndvi[..], &["red.zf", "--op", "nope"]].concat(), "nope");
}

/// Prose-like text: words of a 3,000-word vocabulary drawn with Zipf-like frequencies, with
/// spaces, commas, full stops and line breaks.
fn prose(bytes: usize) -> Vec<u8> {
    let mut s: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        s.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let vocab: Vec<Vec<u8>> = (0..3000)
        .map(|_| {
            let len = 2 + next() % 9;
            (0..len).map(|_| b'a' + (next() % 26) as u8).collect()
        })
        .collect();
    let mut out = Vec::with_capacity(bytes + 16);
    while out.len() < bytes {
        // Rank r with weight about 1/r: the inverse of a uniform draw over a log scale.
        let u = (next() % 1_000_000) as f64 / 1e6;
        let r = ((3000f64).powf(u) as usize).saturating_sub(1).min(2999);
        out.extend_from_slice(&vocab[r]);
        out.push(match next() % 20 {
            0 => b',',
            1 => b'.',
            2 => b'\n',
            _ => b' ',
        });
    }
    out
}

/// `compress --text` honours `--objective` and `--min-decode-gbs` as tables do: `smallest`
/// takes the smallest candidate, `fastest` a faster one, and every file decompresses to the
/// input's bytes.
#[test]
fn text_mode_honours_the_objective() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let d = dir.path();
    let text = prose(2 << 20);
    std::fs::write(d.join("prose.txt"), &text).unwrap_or_else(|e| panic!("{e}"));
    let mut sizes = Vec::new();
    for args in [
        &["--objective", "smallest"][..],
        &["--objective", "balanced"][..],
        &["--objective", "fastest"][..],
        &["--min-decode-gbs", "1000"][..],
    ] {
        let out = format!("p{}.zf", sizes.len());
        let mut all = vec!["compress", "--text", "prose.txt", "-o", &out];
        all.extend_from_slice(args);
        let o = zipflow(&all, d);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let back = format!("p{}.txt", sizes.len());
        let o = zipflow(&["decompress", &out, "-o", &back], d);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        assert!(
            std::fs::read(d.join(&back)).is_ok_and(|b| b == text),
            "{args:?}"
        );
        let size = std::fs::metadata(d.join(&out)).map_or(0, |m| m.len());
        sizes.push(size);
    }
    assert!(
        sizes[0] <= sizes[1],
        "smallest {} > balanced {}",
        sizes[0],
        sizes[1]
    );
    assert!(
        sizes[1] <= sizes[2],
        "balanced {} > fastest {}",
        sizes[1],
        sizes[2]
    );
    // No text plan decodes at 1,000 GB/s: the fastest one, stored plain.
    assert!(sizes[3] >= text.len() as u64, "{sizes:?}");
    assert!(sizes[0] * 10 < text.len() as u64 * 5, "{sizes:?}");
    let o = zipflow(&["inspect", "p0.zf"], d);
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(shown.contains("words("), "{shown}");
}
