//! Links the `isocert` executable, on Linux with glibc, so that a small check maps little
//! of it: packed relative relocations, and the code a short check runs laid out together.
//!
//! **Packed relocations** (`-z pack-relative-relocs`, `DT_RELR`). The executable is
//! position-independent, so the loader applies about 49,000 relative relocations at every
//! start. As `.rela.dyn` entries they take 1.15 MB, which the loader reads in full before
//! `main`: a quarter of a small check's resident memory (docs/PERFORMANCE.md, "The
//! 10,000-transaction floor"). Packed, they take 14 KB, and address-space randomisation is
//! kept. GNU ld 2.38+ and lld 15+ understand the flag. The C library must also support it:
//! glibc 2.36+ does, and the linker records the `GLIBC_ABI_DT_RELR` version the loader
//! checks. An older linker ignores the option with a warning.
//!
//! **Hot text** (`hot-text.ld`, written by `scripts/hot-text`). A linker script that puts
//! the sections of the functions a short check runs into one output section before
//! `.text` (`INSERT BEFORE .text` keeps the linker's default layout for everything else).
//! The code a small check runs then sits in a few contiguous pages instead of 4 MB of
//! scattered ones (docs/PERFORMANCE.md, "The code a check runs, together"). lld (Rust's
//! default linker on x86_64 Linux) and GNU ld read it; `ISOCERT_HOT_TEXT=0` leaves it out,
//! for a linker that does not (gold, mold).

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=hot-text.ld");
    println!("cargo:rerun-if-env-changed=ISOCERT_HOT_TEXT");
    if os != "linux" || env != "gnu" {
        return;
    }
    println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    if std::env::var("ISOCERT_HOT_TEXT").as_deref() != Ok("0") {
        let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
        let script = std::path::Path::new(&dir).join("hot-text.ld");
        if script.exists() {
            // As two linker arguments: a path with a comma would split in `-Wl,`.
            for arg in ["-Xlinker", "-T", "-Xlinker"] {
                println!("cargo:rustc-link-arg-bins={arg}");
            }
            println!("cargo:rustc-link-arg-bins={}", script.display());
        }
    }
}
