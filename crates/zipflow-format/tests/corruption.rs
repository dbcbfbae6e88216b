//! Damaged files: truncations, bit flips, random bytes and crafted footers give errors that
//! name the file (and the column and chunk when the damage is inside a chunk), never panics.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use arrow::array::*;
use arrow::datatypes::*;
use zipflow_core::{Error, Result};
use zipflow_format::file::{HEADER_LEN, TRAILER_LEN};
use zipflow_format::{TableWriter, WriteOptions, ZfFile};

const NAME: &str = "damaged.zf";

/// A small file: ints with nulls, a string column, a float column; 3 chunks each.
fn sample() -> (Vec<u8>, Vec<RecordBatch>) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("qty", DataType::Int32, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("price", DataType::Float64, false),
        // Read through the streaming fast paths (no nulls).
        Field::new("amount", DataType::Decimal128(15, 2), false),
        Field::new("flag", DataType::Utf8View, false),
    ]));
    let n = 2500;
    let mut rng = common::Rng(11);
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from_iter_values(0..n as i64)),
            Arc::new(Int32Array::from(
                (0..n)
                    .map(|i| (i % 9 != 0).then(|| (rng.below(50)) as i32))
                    .collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                (0..n)
                    .map(|i| (i % 11 != 0).then(|| ["a", "bb", "ccc"][i % 3]))
                    .collect::<Vec<_>>(),
            )),
            Arc::new(Float64Array::from_iter_values(
                (0..n).map(|i| (i % 100) as f64 * 0.5),
            )),
            Arc::new(
                Decimal128Array::from_iter_values((0..n).map(|i| (i as i128 * 37) % 1000))
                    .with_precision_and_scale(15, 2)
                    .unwrap(),
            ),
            Arc::new(StringViewArray::from_iter_values(
                (0..n).map(|i| ["A", "N", "a flag longer than twelve"][i % 3]),
            )),
        ],
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(NAME);
    let options = WriteOptions {
        chunk_rows: 1000,
        ..common::selected()
    };
    let mut w = TableWriter::create(&path, schema, options).unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let file = ZfFile::open(&path).unwrap();
    let batches = file.batches().collect::<Result<Vec<_>>>().unwrap();
    (bytes, batches)
}

/// Opens and reads every chunk; the first error, or the batches.
fn read(bytes: &[u8]) -> Result<Vec<RecordBatch>> {
    let file = ZfFile::from_bytes(NAME, bytes)?;
    file.batches().collect()
}

/// Where byte `pos` lies: `Some((column, chunk))` inside a chunk payload.
fn chunk_at(original: &ZfFile, pos: usize) -> Option<(String, usize)> {
    for (c, col) in original.columns().iter().enumerate() {
        for i in 0..original.num_chunks() {
            let m = original.chunk_meta(c, i);
            let start = m.offset as usize;
            if (start..start + m.payload_len() as usize).contains(&pos) {
                return Some((col.name.clone(), i));
            }
        }
    }
    None
}

fn check_error(e: &Error, place: Option<&(String, usize)>, what: &str) {
    let msg = e.to_string();
    assert!(
        msg.starts_with(NAME),
        "{what}: error does not name the file: {msg}"
    );
    if let Some((col, chunk)) = place {
        let want = format!("{NAME}, column `{col}`, chunk {chunk}: ");
        assert!(
            msg.starts_with(&want),
            "{what}: expected `{want}...`, got: {msg}"
        );
    }
}

#[test]
fn truncations_are_errors() {
    let (bytes, _) = sample();
    let mut cuts: Vec<usize> = (0..bytes.len()).step_by(7).collect();
    cuts.extend(bytes.len().saturating_sub(200)..bytes.len());
    for n in cuts {
        let e = read(&bytes[..n]).expect_err("a truncated file must not read");
        check_error(&e, None, &format!("cut at {n}"));
    }
}

#[test]
fn bit_flips_are_errors() {
    let (bytes, good) = sample();
    let original = ZfFile::from_bytes(NAME, &bytes).unwrap();
    let n = bytes.len();
    let footer_len = u64::from_le_bytes(bytes[n - 24..n - 16].try_into().unwrap()) as usize;
    let footer_start = n - TRAILER_LEN - footer_len;
    let mut checked_in_chunks = 0;
    for pos in 0..bytes.len() {
        // Every byte of header, footer and trailer; a spread of bytes inside payloads.
        let in_edges = pos < HEADER_LEN || pos >= footer_start;
        if !in_edges && pos % 5 != 0 {
            continue;
        }
        let mut damaged = bytes.clone();
        damaged[pos] ^= 1 << (pos * 3 % 8);
        let place = chunk_at(&original, pos);
        match read(&damaged) {
            Err(e) => {
                check_error(&e, place.as_ref(), &format!("flip at {pos}"));
                checked_in_chunks += usize::from(place.is_some());
            }
            // Only bytes no checksum covers (padding) may change without an error.
            Ok(batches) => {
                assert!(
                    place.is_none(),
                    "flip at {pos} inside a chunk read without error"
                );
                assert_eq!(batches, good, "flip at {pos} changed the data silently");
            }
        }
    }
    assert!(checked_in_chunks > 100);
}

#[test]
fn random_bytes_are_errors() {
    let mut rng = common::Rng(99);
    let (bytes, _) = sample();
    for round in 0..300 {
        let len = rng.below(3000) as usize;
        let mut junk: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if round % 2 == 0 && len >= HEADER_LEN + TRAILER_LEN {
            // Valid magics around junk get past the first checks.
            junk[..HEADER_LEN].copy_from_slice(&bytes[..HEADER_LEN]);
            let end = junk.len() - 8;
            junk[end..].copy_from_slice(b"ZFEND001");
        }
        let e = read(&junk).expect_err("junk must not read");
        check_error(&e, None, &format!("junk round {round}"));
    }
}

/// `bytes` with its footer replaced by `footer` (stored bytes) and the trailer to match.
fn with_footer(bytes: &[u8], footer: &[u8]) -> Vec<u8> {
    let n = bytes.len();
    let footer_len = u64::from_le_bytes(bytes[n - 24..n - 16].try_into().unwrap()) as usize;
    let mut out = bytes[..n - TRAILER_LEN - footer_len].to_vec();
    out.extend_from_slice(footer);
    out.extend_from_slice(&(footer.len() as u64).to_le_bytes());
    out.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(footer).to_le_bytes());
    out.extend_from_slice(b"ZFEND001");
    out
}

/// The footer layout of `bytes` (this build's file: a Zstandard frame).
fn footer_layout(bytes: &[u8]) -> Vec<u8> {
    let n = bytes.len();
    let footer_len = u64::from_le_bytes(bytes[n - 24..n - 16].try_into().unwrap()) as usize;
    zstd::bulk::decompress(
        &bytes[n - TRAILER_LEN - footer_len..n - TRAILER_LEN],
        1 << 24,
    )
    .unwrap()
}

/// Damage inside the footer's layout, stored and checksummed again: the index checks must
/// catch what matters, and nothing may panic.
#[test]
fn crafted_footers_never_panic() {
    let (bytes, good) = sample();
    let layout = footer_layout(&bytes);
    let mut rng = common::Rng(5);
    for pos in 0..layout.len() {
        for _ in 0..2 {
            let mut crafted = layout.clone();
            crafted[pos] ^= 1 << rng.below(8);
            let damaged = with_footer(&bytes, &zstd::bulk::compress(&crafted, 3).unwrap());
            let result = std::panic::catch_unwind(|| read(&damaged));
            match result {
                Err(_) => panic!("crafted footer (byte {pos}) panicked"),
                Ok(Err(e)) => check_error(&e, None, &format!("footer byte {pos}")),
                // A changed schema (say a decimal's scale) is a different valid file;
                // statistics and plan text do not change the data.
                Ok(Ok(batches)) => {
                    if batches.first().map(|b| b.schema()) == good.first().map(|b| b.schema()) {
                        assert_eq!(batches, good, "footer byte {pos}");
                    }
                }
            }
        }
    }
}

/// `bytes` (this build's file) relabelled as format `version`, its footer stored as that
/// version stores it: the layout as it is before version 4, one Zstandard frame from then on.
fn as_version(bytes: &[u8], version: u16) -> Vec<u8> {
    let mut layout = footer_layout(bytes);
    layout[..2].copy_from_slice(&version.to_le_bytes());
    let footer = if version >= zipflow_format::file::COMPRESSED_FOOTER {
        zstd::bulk::compress(&layout, 3).unwrap()
    } else {
        layout
    };
    let mut out = with_footer(bytes, &footer);
    out[8..10].copy_from_slice(&version.to_le_bytes());
    out
}

/// Files of format versions 1 to 3 (the same chunks: none of them needs what a later version
/// added, and each chunk tells by its trees whether it stores its null slots; the footer
/// uncompressed) still read.
#[test]
fn older_versions_still_read() {
    let (bytes, batches) = sample();
    for version in 1..zipflow_format::file::VERSION {
        let old = as_version(&bytes, version);
        assert_eq!(read(&old).unwrap(), batches, "version {version}");
        // The footer's version must match the header's.
        let mut other = old.clone();
        other[8] = version as u8 + 1;
        let msg = read(&other).unwrap_err().to_string();
        assert!(
            msg.contains(&format!("footer says format version {version}"))
                || msg.contains("footer: "),
            "{msg}"
        );
    }
}

/// A compressed footer that lies about its size, or is not a Zstandard frame, is an error
/// naming the footer, with nothing allocated for the claimed size.
#[test]
fn a_compressed_footer_that_lies_is_an_error() {
    let (bytes, _) = sample();
    let reframe = |footer: Vec<u8>| with_footer(&bytes, &footer);
    // The layout itself, not compressed.
    let layout = footer_layout(&bytes);
    let msg = read(&reframe(layout.clone())).unwrap_err().to_string();
    assert!(msg.contains("footer: not a Zstandard frame"), "{msg}");
    // A bomb: 64 MiB of zeros in a few KB.
    let bomb = zstd::bulk::compress(&vec![0u8; 64 << 20], 3).unwrap();
    let msg = read(&reframe(bomb)).unwrap_err().to_string();
    assert!(
        msg.contains("footer: its frame claims 67108864 bytes"),
        "{msg}"
    );
    // A frame cut short.
    let mut frame = zstd::bulk::compress(&layout, 3).unwrap();
    frame.truncate(frame.len() - 3);
    let msg = read(&reframe(frame)).unwrap_err().to_string();
    assert!(msg.contains("footer: Zstandard frame"), "{msg}");
}

#[test]
fn newer_version_is_unsupported() {
    let (mut bytes, _) = sample();
    let newer = zipflow_format::file::VERSION + 1;
    bytes[8..10].copy_from_slice(&newer.to_le_bytes());
    let e = read(&bytes).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Unsupported { .. }), "{msg}");
    let want = format!(
        "newer zipflow (format version {newer}, this build reads up to {})",
        zipflow_format::file::VERSION
    );
    assert!(msg.contains(&want), "{msg}");
}

#[test]
fn damaged_file_on_disk_names_its_path() {
    let (mut bytes, _) = sample();
    let original = ZfFile::from_bytes(NAME, &bytes).unwrap();
    let m = original.chunk_meta(1, 2).clone();
    bytes[m.offset as usize + 20] ^= 0x10;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.zf");
    std::fs::write(&path, &bytes).unwrap();
    let file = ZfFile::open(&path).unwrap();
    let mut scratch = zipflow_encodings::Scratch::default();
    // Other chunks still read.
    file.read_chunk(1, 1, &mut scratch).unwrap();
    let e = file.read_chunk(1, 2, &mut scratch).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Checksum { .. }), "{msg}");
    assert!(
        msg.starts_with(&format!(
            "{}, column `qty`, chunk 2: checksum mismatch in chunk payload",
            path.display()
        )),
        "{msg}"
    );
    assert!(
        ZfFile::open(dir.path().join("missing.zf"))
            .unwrap_err()
            .to_string()
            .contains("missing.zf")
    );
}

#[test]
fn resealed_damage_reaches_the_decoders() {
    let (bytes, batches) = sample();
    assert_eq!(zipflow_format::file::reseal(&bytes).unwrap(), bytes);
    let original = ZfFile::from_bytes(NAME, &bytes).unwrap();
    let (mut decoded, mut errors) = (0, 0);
    let mut rng = common::Rng(5);
    for pos in (HEADER_LEN..bytes.len() - TRAILER_LEN).step_by(3) {
        let mut damaged = bytes.clone();
        damaged[pos] ^= 1 << rng.below(8);
        let resealed = zipflow_format::file::reseal(&damaged).unwrap();
        match read(&resealed) {
            Ok(got) => {
                decoded += 1;
                // A flip the decoders accept must still give the table's shape.
                let rows: usize = got.iter().map(RecordBatch::num_rows).sum();
                assert_eq!(rows, 2500, "byte {pos}");
                if chunk_at(&original, pos).is_none() && got != batches {
                    // Outside every payload only padding and the footer remain; a footer
                    // change that parses may change metadata but never the values silently
                    // to something of another shape.
                    assert_eq!(got.len(), batches.len(), "byte {pos}");
                }
            }
            Err(e) => {
                errors += 1;
                assert!(
                    !matches!(e, Error::Checksum { .. }),
                    "byte {pos}: resealed, yet a checksum error: {e}"
                );
                check_error(&e, None, &format!("byte {pos}"));
            }
        }
    }
    assert!(
        decoded > 0 && errors > 0,
        "decoded {decoded}, errors {errors}"
    );
}

/// A file truncated, or overwritten in place, while a reader has it open: every chunk read
/// afterwards is an error naming file, column and chunk (a short read, or a checksum that no
/// longer matches), never a fault or other values; chunks past the cut fail, the others read.
#[test]
fn a_file_changed_under_an_open_reader_gives_errors() {
    let (bytes, good) = sample();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(NAME);
    std::fs::write(&path, &bytes).unwrap();
    let file = ZfFile::open(&path).unwrap();
    // Read once, so any per-chunk caching is warm.
    assert_eq!(file.batches().collect::<Result<Vec<_>>>().unwrap(), good);
    let first = file.chunk_meta(0, 0);
    let cut = first.offset + first.payload_len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(cut)
        .unwrap();
    // Chunk 0 of column 0 lies before the cut and still reads.
    let mut scratch = Default::default();
    file.read_chunk(0, 0, &mut scratch).unwrap();
    for c in 1..file.columns().len() {
        let e = file.read_array(c, 0, &mut scratch).unwrap_err().to_string();
        let want = format!("{NAME}, column `{}`, chunk 0: ", file.columns()[c].name);
        assert!(e.contains(&want) && e.contains("truncated"), "{e}");
    }
    // The same length again, other bytes: checksums catch every changed chunk.
    let mut changed = bytes.clone();
    for b in &mut changed[HEADER_LEN..] {
        *b ^= 0x5a;
    }
    std::fs::write(&path, &changed).unwrap();
    for c in 0..file.columns().len() {
        for i in 0..file.num_chunks() {
            let e = file.read_array(c, i, &mut scratch).unwrap_err();
            let want = format!("{NAME}, column `{}`, chunk {i}: ", file.columns()[c].name);
            assert!(e.to_string().contains(&want), "{e}");
            assert!(e.to_string().contains("checksum"), "{e}");
        }
    }
}

/// Inputs that once reached a panic inside a dependency (caught, but a panic all the same:
/// a reader must reject them before): each, checksums recomputed, is an error and no panic
/// hook runs.
#[test]
fn fuzzer_findings_are_errors_without_panics() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static PANICS: AtomicUsize = AtomicUsize::new(0);
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/regressions");
    let mut found = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = zipflow_format::file::reseal(&std::fs::read(&path).unwrap()).unwrap();
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {
            PANICS.fetch_add(1, Ordering::SeqCst);
        }));
        let read =
            ZfFile::from_bytes(NAME, &bytes).and_then(|f| f.batches().collect::<Result<Vec<_>>>());
        std::panic::set_hook(previous);
        let e = read.expect_err("a damaged file must not read");
        check_error(&e, None, &path.display().to_string());
        assert_eq!(PANICS.load(Ordering::SeqCst), 0, "{}: {e}", path.display());
        found += 1;
    }
    assert!(found > 0, "no inputs in {dir}");
}
