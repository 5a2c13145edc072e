//! Any byte string is either a legacy dbcop history.bincode or a clear error; never a panic.
#![no_main]

use isocert_history::formats::{read_dbcop_bincode, Format};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(imported) = read_dbcop_bincode(data) {
        let mut out = Vec::new();
        if Format::DbcopBincode.write(&imported.history, &mut out).is_ok() {
            read_dbcop_bincode(&out[..]).expect("what isocert writes, it reads back");
        }
    }
});
