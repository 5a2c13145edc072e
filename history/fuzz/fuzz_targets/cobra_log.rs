//! Any byte string is either a Cobra client log or a clear error; never a panic.
#![no_main]

use isocert_history::formats::{read_cobra_log, Format};
use isocert_history::Scalar;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(imported) = read_cobra_log(Scalar::Int(1), data) {
        let dir = std::env::temp_dir().join(format!("isocert-fuzz-cobra-{}", std::process::id()));
        // Whatever was read must write back (or be refused by name), never panic.
        let _ = Format::Cobra.write_path(&imported.history, &dir);
    }
});
