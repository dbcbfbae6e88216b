//! Arbitrary bytes as a .zf file: opening and reading every chunk returns errors, never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::Write;
use zipflow_encodings::Scratch;

fuzz_target!(|data: &[u8]| {
    let Ok(mut file) = tempfile_in_tmp() else {
        return;
    };
    if file.1.write_all(data).is_err() {
        return;
    }
    drop(file.1);
    if let Ok(zf) = zipflow_format::ZfFile::open(&file.0) {
        let mut scratch = Scratch::default();
        for c in 0..zf.columns().len() {
            for i in 0..zf.num_chunks() {
                let _ = zf.read_array(c, i, &mut scratch);
            }
        }
    }
    let _ = std::fs::remove_file(&file.0);
    file.0.clear();
});

fn tempfile_in_tmp() -> std::io::Result<(std::path::PathBuf, std::fs::File)> {
    let path = std::env::temp_dir().join(format!("zipflow-fuzz-{}.zf", std::process::id()));
    let f = std::fs::File::create(&path)?;
    Ok((path, f))
}
