//! Arbitrary text as a plan: parses or errors, and what parses prints back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zipflow_core::Plan;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(plan) = text.parse::<Plan>() {
        let printed = plan.to_string();
        assert_eq!(printed.parse::<Plan>().ok(), Some(plan));
    }
});
