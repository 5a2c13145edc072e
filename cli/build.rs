//! Links the `isocert` executable with packed relative relocations (`DT_RELR`) on Linux
//! with glibc.
//!
//! The executable is position-independent, so the loader applies about 49,000 relative
//! relocations at every start. As `.rela.dyn` entries they take 1.15 MB, which the loader
//! reads in full before `main`. That is a quarter of a small check's resident memory
//! (docs/PERFORMANCE.md, "The 10,000-transaction floor"). Packed, they take 14 KB, and
//! address-space randomisation is kept. GNU ld 2.38+ and lld 15+ understand the flag.
//! The C library must also support it: glibc 2.36+ does, and the linker records
//! the `GLIBC_ABI_DT_RELR` version the loader checks. An older linker ignores the option
//! with a warning.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
