//! Arbitrary bytes as an encoded stream: decoding returns values or an error, never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(values) = zipflow_encodings::decode_bytes(data) {
        // Whatever decoded must describe itself and re-encode without panicking.
        if let Ok(node) = zipflow_encodings::NodeView::parse(data) {
            let _ = zipflow_encodings::describe(&node);
        }
        let _ = values.len();
    }
});
