//! Every file isocert writes is written whole or not at all
//! ([`isocert_history::write_atomically`]): a failed command leaves no fragment that
//! another tool could take for a shorter history, certificate or report.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::Context;

/// Writes `path` through `write`, atomically, naming the file in errors.
pub(crate) fn write_file(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<&mut File>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    isocert_history::write_atomically(path, |out| write(out))
        .with_context(|| format!("writing {}", path.display()))
}

/// Writes `text` to `path`, atomically.
pub(crate) fn write_text(path: &Path, text: &str) -> anyhow::Result<()> {
    write_file(path, |out| Ok(out.write_all(text.as_bytes())?))
}
