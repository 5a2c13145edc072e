//! Any byte string is either a Jepsen EDN history or a clear error; never a panic.
#![no_main]

use isocert_history::formats::{read_elle_edn, Format};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(imported) = read_elle_edn(data) {
        let mut out = Vec::new();
        if Format::Elle.write(&imported.history, &mut out).is_ok() {
            read_elle_edn(&out[..]).expect("what isocert writes, it reads back");
        }
    }
});
