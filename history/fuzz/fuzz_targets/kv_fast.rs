//! The hand-written fast readers (v1 key-value lines and the Chronos format) on any byte
//! string: a model or a clear error, never a panic; and a v1 model the fast reader accepts
//! is written and read back to the same model. (history/tests/fast_readers.rs compares the
//! fast readers with the general reader on generated histories.)
#![no_main]

use isocert_history::{chronos, read_kv_v1_bytes, v1};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(kv) = read_kv_v1_bytes(data) {
        let h = kv.into_history();
        let mut out = Vec::new();
        v1::write_history(&h, &mut out).expect("writing to memory");
        let again = read_kv_v1_bytes(&out).expect("what isocert writes, it reads back");
        let mut out2 = Vec::new();
        v1::write_history(&again.into_history(), &mut out2).expect("writing to memory");
        assert_eq!(out, out2, "a round trip changed the model");
    }
    let _ = chronos::read_chronos(data, None);
});
