//! Every file isocert writes is written whole or not at all
//! ([`isocert_history::write_atomically`]): a failed command leaves no fragment that
//! another tool could take for a shorter history, certificate or report.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

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

/// Reads a text file, naming the line and byte of the first byte that is not UTF-8 (the
/// standard library's error, "stream did not contain valid UTF-8", named neither).
///
/// # Errors
/// The I/O error, or the position of the invalid byte, with the path.
pub(crate) fn read_text(path: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let line = bytes[..at].iter().filter(|b| **b == b'\n').count() + 1;
        let column = at - bytes[..at].iter().rposition(|b| *b == b'\n').map_or(0, |nl| nl + 1) + 1;
        anyhow::anyhow!(
            "reading {}: line {line}, byte {column}: not UTF-8 text (byte 0x{:02x})",
            path.display(),
            bytes[at]
        )
    })
}

/// Refuses an output that would overwrite or remove an input: `--html out/history.jsonl`
/// used to replace the finished history it reported on. `outputs` are (flag, path) pairs;
/// an output is refused when it is an input (the same file, through any path or link; an
/// input that does not exist yet, such as a run's own result, is compared by its absolute
/// path) or a directory that holds one (a directory format's target, which `--force`
/// clears), and when two outputs name the same file.
///
/// # Errors
/// Naming the flag, the output and the input it would destroy.
pub(crate) fn ensure_outputs_spare_inputs(outputs: &[(&str, &Path)], inputs: &[&Path]) -> anyhow::Result<()> {
    let inputs: Vec<(&Path, PathBuf)> = inputs.iter().filter_map(|p| resolve(p).map(|r| (*p, r))).collect();
    let mut seen: Vec<(&str, PathBuf)> = Vec::new();
    for (flag, output) in outputs {
        let Some(out) = resolve(output) else { continue };
        if let Some((input, _)) = inputs.iter().find(|(_, r)| r.starts_with(&out)) {
            let what = if out.is_dir() { "holds" } else { "is" };
            anyhow::bail!(
                "{flag} {} {what} the input {}: an output never overwrites an input; choose another path",
                output.display(),
                input.display()
            );
        }
        // Devices and pipes (`/dev/null`) may take several outputs.
        let device = std::fs::metadata(&out).is_ok_and(|m| !m.is_file() && !m.is_dir());
        if let Some((other, _)) = seen.iter().find(|(_, r)| *r == out && !device) {
            anyhow::bail!("{flag} and {other} name the same file {}", output.display());
        }
        seen.push((flag, out));
    }
    Ok(())
}

/// `path` with links resolved as far as it exists: the whole path, else its parent joined
/// with its name, else the absolute path as written.
fn resolve(path: &Path) -> Option<PathBuf> {
    if let Ok(p) = std::fs::canonicalize(path) {
        return Some(p);
    }
    if let (Some(parent), Some(name)) = (path.parent(), path.file_name()) {
        let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
        if let Ok(p) = std::fs::canonicalize(parent) {
            return Some(p.join(name));
        }
    }
    std::path::absolute(path).ok()
}

/// `eprintln!` that ignores a failed write. After SIGHUP the closed terminal answers every
/// write with an error, on which `eprintln!` panics: a run interrupted by a hangup must still
/// save what completed and drop what it created.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
pub(crate) use note;

/// `print!` to standard output that ignores a failed write (see [`note!`]).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}
pub(crate) use say;
