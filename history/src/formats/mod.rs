//! Other tools' history formats, read into and written from the one [`History`] model.
//!
//! [`Format`] names every format isocert speaks; the CLI parses `--format NAME` into it and
//! calls [`Format::read_path`] / [`Format::write_path`]. Each format lives in its own module;
//! what each can and cannot carry is in `docs/FORMATS.md`.
//!
//! | name | tool | shape |
//! |---|---|---|
//! | `v1` | isocert | JSON Lines, one transaction per line |
//! | `chronos` | Chronos / TimeKiller | a JSON array of transactions with `sts`/`cts` timestamps |
//! | `elle` | Jepsen / Elle | EDN operation maps (invoke/complete pairs) |
//! | `elle-json` | elle-cli | the same operations as JSON |
//! | `dbcop` | dbcop | JSON sessions of transactions of events |
//! | `dbcop-hist` | dbcop | the `.hist` text DSL |
//! | `dbcop-bincode` | dbcop (legacy), PolySI | little-endian `history.bincode` |
//! | `plume` | PolySI, Plume, IsoVista, AWDIT | text, `r(key,value,session,txn)` per line |
//! | `awdit-test` | AWDIT's test suite | text, `r KEY VALUE` per line, `-----` / `=====` between transactions / sessions |
//! | `cobra` | Cobra | a directory of big-endian binary client logs `*.log` |
//! | `viper` | Viper | a directory of `J*.log` JSON-lines session logs |
//!
//! Importers of formats that carry certificate facts return them in [`Imported::certificate`]
//! (Elle list-append: the version order from traceability, see [`list_append_certificate`]; a
//! Cobra directory read with King Cobra's `.vo` file: its version order, see
//! [`read_cobra_dir_with_version_order`]).

mod awdit_test;
mod closed_universe;
mod cobra;
mod dbcop;
mod dbcop_bincode;
mod dbcop_text;
mod edn;
mod elle;
mod elle_ops;
mod king_cobra;
mod kvutil;
mod plume;
mod remap;
mod traceability;
mod viper;

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::{BufReader, Write};
use std::path::Path;
use std::str::FromStr;

pub use awdit_test::{read_awdit_test, write_awdit_test};
pub use cobra::{read_cobra_dir, read_cobra_log, write_cobra_dir, COBRA_INIT_ID, COBRA_NULL_ID};
pub use dbcop::{read_dbcop_json, write_dbcop_json};
pub use dbcop_bincode::{read_dbcop_bincode, write_dbcop_bincode};
pub use dbcop_text::{read_dbcop_text, write_dbcop_text};
pub use edn::{Edn, EdnReader};
pub use elle::{read_elle_edn, read_elle_json, write_elle_edn, write_elle_json};
pub use king_cobra::{
    parse_king_cobra_version_order, read_cobra_dir_with_version_order, read_cobra_log_with_version_order,
    write_king_cobra_version_order, KeyVersions,
};
pub use plume::{read_plume, read_plume_kv, write_plume};
pub use remap::remap_certificate;
pub use traceability::{list_append_certificate, PrefixConflict, Traceability};
pub use viper::{read_viper_dir, write_viper_dir};

use crate::{v1, Certificate, FormatError, History};

/// A history format isocert reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// isocert's own JSON Lines (`shared/spec/history-format-v1.md`).
    V1,
    /// The Chronos/TimeKiller JSON array (`tid`, `sid`, `sts`, `cts`, `ops`); keys start absent.
    Chronos,
    /// Jepsen/Elle EDN: one operation map per line (or one vector of them).
    Elle,
    /// elle-cli's JSON rendering of Jepsen operations (an array, or one object per line).
    ElleJson,
    /// dbcop's JSON: sessions of `{"events":[...],"committed":bool}` (bare or wrapped in `data`).
    DbcopJson,
    /// dbcop's `.hist` text DSL (`[x:=1 y==?]`, sessions separated by `---`).
    DbcopText,
    /// The legacy dbcop `history.bincode` (little-endian), as PolySI publishes its histories.
    DbcopBincode,
    /// PolySI / Plume / IsoVista / AWDIT text: `r(key,value,session,txn)` per line.
    Plume,
    /// AWDIT's test-suite text: `r KEY VALUE` / `w KEY VALUE` lines, `-----` between
    /// transactions, `=====` between sessions; no initial state.
    AwditTest,
    /// A directory of Cobra binary client logs (`*.log`, big-endian S/W/R/C records).
    Cobra,
    /// A directory of Viper session logs (`J*.log`, one JSON transaction per line).
    Viper,
}

/// Every format, in the order `--help` lists them.
pub const ALL_FORMATS: [Format; 11] = [
    Format::V1,
    Format::Chronos,
    Format::Elle,
    Format::ElleJson,
    Format::DbcopJson,
    Format::DbcopText,
    Format::DbcopBincode,
    Format::Plume,
    Format::AwditTest,
    Format::Cobra,
    Format::Viper,
];

/// What an importer produced: the history, and the certificate facts the format carries.
#[derive(Debug)]
pub struct Imported {
    /// The history, in the one model.
    pub history: History,
    /// Certificate facts the format itself carries or implies (Elle list-append traceability).
    pub certificate: Option<Certificate>,
    /// Things the reader noticed and the user should know (reads that disagree on a prefix,
    /// operations a format marks as failed and the model has no place for).
    pub notes: Vec<String>,
}

impl Imported {
    /// A history with no certificate facts and nothing to note.
    pub fn plain(history: History) -> Self {
        Imported { history, certificate: None, notes: Vec::new() }
    }
}

impl Format {
    /// The name `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            Format::V1 => "v1",
            Format::Chronos => "chronos",
            Format::Elle => "elle",
            Format::ElleJson => "elle-json",
            Format::DbcopJson => "dbcop",
            Format::DbcopText => "dbcop-hist",
            Format::DbcopBincode => "dbcop-bincode",
            Format::Plume => "plume",
            Format::AwditTest => "awdit-test",
            Format::Cobra => "cobra",
            Format::Viper => "viper",
        }
    }

    /// Whether the format is a directory of files rather than one file.
    pub fn is_directory(self) -> bool {
        matches!(self, Format::Cobra | Format::Viper)
    }

    /// Guesses the format from a path: a directory of `J*.log` is Viper, of `*.log` Cobra;
    /// `.edn` Elle, `.hist` dbcop text, `.bincode` dbcop bincode, `.txt` Plume, `.jsonl` v1.
    pub fn guess(path: &Path) -> Option<Format> {
        if path.is_dir() {
            let names: Vec<String> = std::fs::read_dir(path)
                .ok()?
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".log"))
                .collect();
            if !names.is_empty() && names.iter().all(|n| n.starts_with('J')) {
                return Some(Format::Viper);
            }
            if !names.is_empty() {
                return Some(Format::Cobra);
            }
            return path.join("history.bincode").is_file().then_some(Format::DbcopBincode);
        }
        match path.extension()?.to_str()? {
            "edn" => Some(Format::Elle),
            "hist" => Some(Format::DbcopText),
            "bincode" => Some(Format::DbcopBincode),
            "txt" => Some(Format::Plume),
            "jsonl" => Some(Format::V1),
            _ => None,
        }
    }

    /// Reads a history in this format from `path` (a directory for Cobra and Viper; for
    /// dbcop bincode either the file or the directory holding `history.bincode`).
    ///
    /// # Errors
    /// A [`FormatError`] naming the file, the line (or byte offset) and the field.
    pub fn read_path(self, path: &Path) -> Result<Imported, FormatError> {
        let open = |p: &Path| {
            File::open(p)
                .map(|f| BufReader::new(crate::text::TextOnly::new(f)))
                .map_err(|e| FormatError::Io(e).in_file(p))
        };
        let in_file = |e: FormatError| e.in_file(path);
        match self {
            Format::V1 => Ok(Imported::plain(v1::read_history(open(path)?).map_err(in_file)?)),
            Format::Chronos => Ok(Imported::plain(
                crate::chronos::read_chronos(open(path)?, None).map_err(in_file)?.into_history(),
            )),
            Format::Elle => read_elle_edn(open(path)?).map_err(in_file),
            Format::ElleJson => read_elle_json(open(path)?).map_err(in_file),
            Format::DbcopJson => read_dbcop_json(open(path)?).map_err(in_file),
            Format::DbcopText => read_dbcop_text(open(path)?).map_err(in_file),
            Format::DbcopBincode => {
                let file = if path.is_dir() { path.join("history.bincode") } else { path.to_path_buf() };
                let binary =
                    File::open(&file).map(BufReader::new).map_err(|e| FormatError::Io(e).in_file(&file))?;
                read_dbcop_bincode(binary).map_err(|e| e.in_file(&file))
            }
            Format::Plume => read_plume(open(path)?).map_err(in_file),
            Format::AwditTest => read_awdit_test(open(path)?).map_err(in_file),
            Format::Cobra => read_cobra_dir(path),
            Format::Viper => read_viper_dir(path),
        }
    }

    /// Writes `h` in this format to `path` (a directory, created if needed, for Cobra, Viper
    /// and dbcop bincode when `path` has no `.bincode` extension). Returns notes on what the
    /// format left out by its nature (e.g. the reads of aborted transactions in Plume text).
    ///
    /// # Errors
    /// [`FormatError::Unsupported`] when the history holds something the format cannot carry
    /// (it names the transaction and operation); I/O errors naming the file.
    pub fn write_path(self, h: &History, path: &Path) -> Result<Vec<String>, FormatError> {
        self.write_path_with(h, path, crate::ExistingDirectory::Refuse)
    }

    /// [`Format::write_path`], saying what to do with a directory format's target that
    /// already holds files: the directory is written whole into a fresh directory and
    /// renamed into place ([`crate::write_directory_atomically`]), so a failed write leaves
    /// no logs behind and old logs never mix with new ones.
    ///
    /// # Errors
    /// As [`Format::write_path`]; an I/O error of kind `AlreadyExists` for a refused target.
    pub fn write_path_with(
        self,
        h: &History,
        path: &Path,
        existing: crate::ExistingDirectory,
    ) -> Result<Vec<String>, FormatError> {
        if self.is_directory() {
            let (h, notes) = self.carried(h);
            crate::write_directory_atomically(path, existing, |dir: &Path| match self {
                Format::Cobra => write_cobra_dir(&h, dir),
                _ => write_viper_dir(&h, dir),
            })
            .map_err(|e| match e {
                FormatError::Io(io) => FormatError::Io(io).in_file(path),
                other => other,
            })?;
            return Ok(notes);
        }
        let file = if self == Format::DbcopBincode && path.extension().is_none_or(|e| e != "bincode") {
            std::fs::create_dir_all(path).map_err(|e| FormatError::Io(e).in_file(path))?;
            path.join("history.bincode")
        } else {
            path.to_path_buf()
        };
        crate::write_atomically(&file, |out| self.write(h, out)).map_err(|e: FormatError| e.in_file(&file))
    }

    /// Writes `h` in this single-file format to `out`; returns notes on what it left out.
    ///
    /// # Errors
    /// [`FormatError::Unsupported`] for what the format cannot carry, or for a directory
    /// format (use [`Format::write_path`]); I/O errors of `out`.
    pub fn write<W: Write>(self, h: &History, out: &mut W) -> Result<Vec<String>, FormatError> {
        let (h, mut notes) = self.carried(h);
        notes.extend(self.write_carried(&h, out)?);
        Ok(notes)
    }

    /// The history this format is written from: without its empty transactions (a
    /// committed transaction without operations) in every format but v1, since some formats have no
    /// place for one (Plume's lines are operations; dbcop's `.hist` reader refuses `[]`) and
    /// none decides a verdict (it reads and writes nothing, and any order it is part of
    /// holds between its neighbours without it). The note counts them.
    fn carried(self, h: &History) -> (Cow<'_, History>, Vec<String>) {
        let empty = h.txns.iter().filter(|t| is_empty_commit(t)).count();
        if self == Format::V1 || empty == 0 {
            return (Cow::Borrowed(h), Vec::new());
        }
        let mut kept = h.without_txns();
        for t in h.txns.iter().filter(|t| !is_empty_commit(t)) {
            kept.push_txn(t.clone()).expect("names of a history are unique");
        }
        let note = format!("{empty} transactions without operations were left out (they decide no verdict)");
        (Cow::Owned(kept), vec![note])
    }

    /// [`Format::write`] of a history this format can carry ([`Format::carried`]).
    fn write_carried<W: Write>(self, h: &History, out: &mut W) -> Result<Vec<String>, FormatError> {
        match self {
            Format::V1 => v1::write_history(h, out)?,
            Format::Chronos => {
                let report = crate::chronos::write_chronos(h, out)?;
                let mut notes = Vec::new();
                if report.skipped_uncommitted > 0 {
                    notes.push(format!(
                        "{} aborted or unknown transactions were left out (the format holds committed ones)",
                        report.skipped_uncommitted
                    ));
                }
                if h.serial_order == crate::SerialOrder::Unknown {
                    notes.push(
                        "the history's serial_order is unknown (its commit timestamps need not be the serial \
                         order) and the Chronos format has no place for it: a serializability check of this \
                         file reads commit order as the serial order; check serializability from the v1 file"
                            .into(),
                    );
                }
                return Ok(notes);
            }
            Format::Elle => write_elle_edn(h, out)?,
            Format::ElleJson => write_elle_json(h, out)?,
            Format::DbcopJson => write_dbcop_json(h, out)?,
            Format::DbcopText => write_dbcop_text(h, out)?,
            Format::DbcopBincode => write_dbcop_bincode(h, out)?,
            Format::Plume => return write_plume(h, out),
            Format::AwditTest => write_awdit_test(h, out)?,
            Format::Cobra | Format::Viper => {
                return Err(FormatError::Unsupported {
                    format: self.name(),
                    message: "this format is a directory of files; write it with write_path".into(),
                })
            }
        }
        Ok(Vec::new())
    }
}

/// Whether `t` committed without an operation (what [`Format::write`] leaves out of every
/// format but v1; one that did not commit is written, or refused, as before).
fn is_empty_commit(t: &crate::Transaction) -> bool {
    t.ops.is_empty() && t.is_committed()
}

/// Facts of a history that a format has no place for, counted by transaction
/// ([`Format::dropped_facts`]); `isocert convert` notes each kind, and refuses to drop
/// those a verdict rests on without `--lossy` (docs/FORMATS.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DroppedFacts {
    /// Transactions with a `start_ts` or `commit_ts` (snapshot isolation's start
    /// dependencies, Chronos and Aion rest on them).
    pub timestamps: usize,
    /// Transactions with `invoked_at`/`completed_at` (strict serializability's real-time
    /// order rests on them).
    pub real_times: usize,
    /// Committed transactions without operations (left out; no verdict rests on them).
    pub empty: usize,
}

impl DroppedFacts {
    /// One note per kind of fact dropped (timestamps, real times), with its count, naming
    /// the target format; the writer's own notes count the empty transactions.
    pub fn notes(&self, to: Format) -> Vec<String> {
        let mut notes = Vec::new();
        if self.timestamps > 0 {
            notes.push(format!(
                "the start_ts/commit_ts of {} transactions were dropped ({to} has no place for them)",
                self.timestamps
            ));
        }
        if self.real_times > 0 {
            notes.push(format!(
                "the invoked_at/completed_at (real time) of {} transactions were dropped ({to} has no place for them)",
                self.real_times
            ));
        }
        notes
    }
}

impl Format {
    /// The name with its indefinite article, for messages: "an elle", "a plume".
    pub fn with_article(self) -> String {
        let article = if self.name().starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
        format!("{article} {}", self.name())
    }

    /// Whether the format carries transactions' `start_ts`/`commit_ts`.
    pub fn carries_timestamps(self) -> bool {
        matches!(self, Format::V1 | Format::Chronos)
    }

    /// Whether the format carries transactions' `invoked_at`/`completed_at` (Jepsen's
    /// `:time`).
    pub fn carries_real_time(self) -> bool {
        matches!(self, Format::V1 | Format::Elle | Format::ElleJson)
    }

    /// What writing `h` in this format drops of the facts [`DroppedFacts`] counts;
    /// timestamps and real times are counted over the transactions with operations.
    pub fn dropped_facts(self, h: &History) -> DroppedFacts {
        let mut dropped = DroppedFacts::default();
        for t in &h.txns {
            if is_empty_commit(t) {
                if self != Format::V1 {
                    dropped.empty += 1;
                }
                continue;
            }
            if !self.carries_timestamps() && (t.start_ts().is_some() || t.commit_ts().is_some()) {
                dropped.timestamps += 1;
            }
            if !self.carries_real_time() && t.real_time().is_some() {
                dropped.real_times += 1;
            }
        }
        dropped
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown `--format` name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown format {name:?} (expected one of: v1, chronos, elle, elle-json, dbcop, dbcop-hist, dbcop-bincode, plume, awdit-test, cobra, viper)")]
pub struct UnknownFormat {
    /// The name given.
    pub name: String,
}

impl FromStr for Format {
    type Err = UnknownFormat;

    /// Parses a format name; aliases: `isocert`, `edn`, `jepsen`, `dbcop-json`, `hist`,
    /// `bincode`, `polysi`, `awdit`, `isovista`, `text` (all four: `plume`), `awdit-tests`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "v1" | "isocert" | "jsonl" => Format::V1,
            "chronos" | "timekiller" => Format::Chronos,
            "elle" | "edn" | "jepsen" | "elle-edn" => Format::Elle,
            "elle-json" | "elle-cli" => Format::ElleJson,
            "dbcop" | "dbcop-json" => Format::DbcopJson,
            "dbcop-hist" | "hist" | "dbcop-text" => Format::DbcopText,
            "dbcop-bincode" | "bincode" => Format::DbcopBincode,
            "plume" | "polysi" | "awdit" | "isovista" | "text" => Format::Plume,
            "awdit-test" | "awdit-tests" => Format::AwditTest,
            "cobra" => Format::Cobra,
            "viper" => Format::Viper,
            _ => return Err(UnknownFormat { name: s.to_string() }),
        })
    }
}
