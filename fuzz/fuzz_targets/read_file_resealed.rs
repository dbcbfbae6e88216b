//! A .zf file mutated, then resealed (every checksum recomputed), so the damage reaches the
//! footer parser and the decoders behind the checksums: opening and reading every chunk
//! returns errors, never panics, and a file that reads gives as many rows as it declares.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(bytes) = zipflow_format::file::reseal(data) else {
        return;
    };
    let Ok(file) = zipflow_format::ZfFile::from_bytes("fuzz.zf", &bytes) else {
        return;
    };
    let mut rows = 0u64;
    for batch in file.batches() {
        match batch {
            Ok(b) => rows += b.num_rows() as u64,
            Err(_) => return,
        }
    }
    assert_eq!(
        rows,
        file.num_rows(),
        "a file that reads must give its rows"
    );
});
