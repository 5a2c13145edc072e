//! Files written whole or not at all.
//!
//! A writer that fails half-way (a malformed input found late, a full disk, Ctrl-C) must not
//! leave a fragment that looks like a shorter history or certificate: another tool would
//! check the fragment and call it consistent. [`write_atomically`] writes into a temporary
//! file beside the target and renames it over the target only when everything was written
//! and flushed; on failure the temporary file is removed and the target is untouched.

use std::fs::{File, Permissions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Writes `path` through `write`, atomically (see the module doc). The file gets mode 0644,
/// as a plainly created file would under the usual umask.
///
/// # Errors
/// `write`'s error, or an I/O error creating, flushing or renaming the file (converted with
/// `From<io::Error>`), in which case `path` is left as it was.
pub fn write_atomically<T, E, F>(path: &Path, write: F) -> Result<T, E>
where
    E: From<io::Error>,
    F: FnOnce(&mut BufWriter<&mut File>) -> Result<T, E>,
{
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut tmp =
        tempfile::Builder::new().prefix(&format!(".{name}.")).suffix(".partial").tempfile_in(dir)?;
    let value = {
        let mut out = BufWriter::new(tmp.as_file_mut());
        let value = write(&mut out)?;
        out.flush()?;
        value
    };
    tmp.as_file().set_permissions(Permissions::from_mode(0o644))?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_leaves_the_target_untouched_and_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        std::fs::write(&path, "before\n").unwrap();
        let failed: Result<(), io::Error> = write_atomically(&path, |w| {
            w.write_all(b"half of a history\n")?;
            Err(io::Error::other("the input was malformed further on"))
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "before\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "a temporary file was left");
    }

    #[test]
    fn a_successful_write_replaces_the_target_readable_by_others() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        let n: Result<usize, io::Error> = write_atomically(&path, |w| w.write(b"whole\n"));
        assert_eq!(n.unwrap(), 6);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "whole\n");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o644);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
