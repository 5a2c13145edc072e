//! Files written whole or not at all.
//!
//! A writer that fails half-way (a malformed input found late, a full disk, Ctrl-C) must not
//! leave a fragment that looks like a shorter history or certificate: another tool would
//! check the fragment and call it consistent. [`write_atomically`] writes into a temporary
//! file beside the target and renames it over the target only when everything was written
//! and flushed; on failure the temporary file is removed and the target is untouched.
//!
//! Only regular files are replaced that way. A target that exists and is not a regular file
//! (`/dev/null`, a named pipe, a terminal) is written in place: renaming over it would
//! replace the device with a plain file (as root, `--out /dev/null` once did exactly that).
//! A symbolic link is followed, so the file it points to is replaced and the link stays.

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
    let resolved;
    let path = match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() => return write_in_place(path, write),
        Ok(_) => {
            resolved = std::fs::canonicalize(path)?;
            resolved.as_path()
        }
        Err(_) => path,
    };
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

/// What to do with a directory that already holds files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExistingDirectory {
    /// Refuse to write (an [`io::ErrorKind::AlreadyExists`] error): an old `T7.log` beside
    /// new logs would be read as part of the new history.
    Refuse,
    /// Replace it whole: the old files are removed once the new directory is complete.
    Replace,
}

/// Writes the directory `path` (a directory format: Cobra's or Viper's logs) through
/// `write`, whole or not at all: `write` fills a fresh temporary directory beside `path`,
/// which is renamed to `path` only when `write` succeeded. A failed write leaves `path` as
/// it was and no temporary directory. An existing empty directory is replaced; one that
/// holds anything, or a file, is refused or replaced as `existing` says.
///
/// # Errors
/// `write`'s error, or an I/O error (kind `AlreadyExists` for a refused target).
pub fn write_directory_atomically<T, E, F>(path: &Path, existing: ExistingDirectory, write: F) -> Result<T, E>
where
    E: From<io::Error>,
    F: FnOnce(&Path) -> Result<T, E>,
{
    let occupied = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::read_dir(path)?.next().is_some(),
        Ok(_) => true,
        Err(_) => false,
    };
    if occupied && existing == ExistingDirectory::Refuse {
        return Err(
            io::Error::new(io::ErrorKind::AlreadyExists, "exists and is not an empty directory").into()
        );
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let staged =
        tempfile::Builder::new().prefix(&format!(".{name}.")).suffix(".partial").tempdir_in(parent)?;
    let value = write(staged.path())?;
    std::fs::set_permissions(staged.path(), Permissions::from_mode(0o755))?;
    if occupied {
        // Moved aside first, removed last: until the new directory is in place the old one
        // is still whole under another name.
        let old = tempfile::Builder::new().prefix(&format!(".{name}.")).suffix(".old").tempdir_in(parent)?;
        let aside = old.path().join("old");
        std::fs::rename(path, &aside)?;
        if let Err(e) = std::fs::rename(staged.path(), path) {
            let _ = std::fs::rename(&aside, path);
            return Err(e.into());
        }
        drop(old);
    } else {
        std::fs::rename(staged.path(), path)?;
    }
    // The staged directory was renamed away: forget it rather than remove the new `path`.
    let _ = staged.keep();
    Ok(value)
}

/// Writes into an existing file that is not a regular one (a device or a pipe).
fn write_in_place<T, E, F>(path: &Path, write: F) -> Result<T, E>
where
    E: From<io::Error>,
    F: FnOnce(&mut BufWriter<&mut File>) -> Result<T, E>,
{
    let mut file = std::fs::OpenOptions::new().write(true).open(path)?;
    let mut out = BufWriter::new(&mut file);
    let value = write(&mut out)?;
    out.flush()?;
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

    #[test]
    fn a_named_pipe_is_written_in_place_and_stays_a_pipe() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
        };
        write_atomically(&fifo, |w| w.write_all(b"through the pipe\n")).unwrap();
        // Before joining: a replaced pipe would leave the reader blocked forever.
        assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "the pipe was replaced");
        assert_eq!(reader.join().unwrap(), "through the pipe\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "a temporary file was left");
    }

    #[test]
    fn a_symbolic_link_is_followed_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("real.jsonl");
        let link = dir.path().join("link.jsonl");
        std::fs::write(&file, "old\n").unwrap();
        std::os::unix::fs::symlink(&file, &link).unwrap();
        write_atomically(&link, |w| w.write_all(b"new\n")).unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new\n");
    }
}
