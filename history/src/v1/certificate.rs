//! Reader and writer of v1 certificates (one JSON document).

use std::io::{Read, Write};

use rustc_hash::{FxHashMap, FxHashSet};
use serde::Deserialize;
use serde_json::{json, Value as Json};

use super::json as j;
use crate::certificate::{ForeignWriter, HiddenRead, HiddenReason, OpRef, SeenVersion, Writer};
use crate::model::KV_TABLE;
use crate::{
    Certificate, FormatError, History, ObjId, Op, Scalar, SerialOrder, SnapshotSet, Transaction, TxnId,
    ValueId,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCertificate<'a> {
    format: Option<String>,
    version: Option<u32>,
    #[serde(default, borrow)]
    version_order: Option<Vec<RawVersionOrder<'a>>>,
    #[serde(default, borrow)]
    version_sets: Option<Vec<RawVersionSet<'a>>>,
    #[serde(default, borrow)]
    serialization_order: Option<Vec<RawKey<'a>>>,
    #[serde(default)]
    transactions: Option<Vec<RawTxnFacts>>,
    /// Whether `transactions`' commit timestamps are the serial order (isocert extension,
    /// the history header's field of the same name; see [`History::serial_order`]).
    #[serde(default)]
    serial_order: Option<String>,
    #[serde(default)]
    foreign_writers: Option<Vec<RawForeign>>,
    /// The initial versions as the certificate's source knows them (isocert extension,
    /// what `isocert serve` answers): they replace the history's claimed ones.
    #[serde(default)]
    initial: Option<Vec<RawForeignWrite>>,
    #[serde(default)]
    hidden_reads: Option<Vec<RawHiddenRead>>,
    /// `"writer"` or `"value"` (isocert extension, [`Certificate::writer_identity`]).
    #[serde(default)]
    version_identity: Option<String>,
}

/// A writer that is not a history transaction (isocert extension, see [`ForeignWriter`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawForeign {
    id: String,
    writes: Vec<RawForeignWrite>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawForeignWrite {
    #[serde(default)]
    table: Option<String>,
    key: Json,
    /// The value, when it is shown; absent: opaque.
    #[serde(default)]
    value: Option<Json>,
}

/// An operation whose outcome rests on a hidden value (isocert extension, see
/// [`HiddenRead`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHiddenRead {
    txn: Json,
    op: u32,
    why: String,
}

/// What recovery learned about one transaction (isocert extension): its outcome when the
/// client could not know it, and its timestamps.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTxnFacts {
    txn: Json,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    start_ts: Option<Json>,
    #[serde(default)]
    commit_ts: Option<Json>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVersionOrder<'a> {
    #[serde(default, borrow)]
    table: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    key: RawKey<'a>,
    #[serde(borrow)]
    writers: RawWriters<'a>,
}

/// A version order's writers: integers (nearly every certificate's transaction ids) in 8
/// bytes each, any other list as [`RawKey`]s of 32. The whole version order is parsed before
/// it is resolved, and at 32 bytes a writer its 460,000 writers of a 100,000-transaction
/// history were 15 MB of fresh pages (issue 34).
enum RawWriters<'a> {
    Ints(Vec<i64>),
    Keys(Vec<RawKey<'a>>),
}

impl RawWriters<'_> {
    fn len(&self) -> usize {
        match self {
            RawWriters::Ints(ints) => ints.len(),
            RawWriters::Keys(keys) => keys.len(),
        }
    }

    /// The `w`th writer as the v1 reader reads keys.
    fn scalar(&self, w: usize) -> Result<Scalar, String> {
        match self {
            RawWriters::Ints(ints) => Ok(Scalar::Int(ints[w])),
            RawWriters::Keys(keys) => keys[w].scalar(),
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for RawWriters<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = RawWriters<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                // What serde says of a `Vec`, which this list was.
                f.write_str("a sequence")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut ints = Vec::new();
                while let Some(key) = seq.next_element::<RawKey<'de>>()? {
                    match key {
                        RawKey::Int(i) => ints.push(i),
                        other => {
                            let mut keys: Vec<RawKey<'de>> = ints.into_iter().map(RawKey::Int).collect();
                            keys.push(other);
                            while let Some(key) = seq.next_element::<RawKey<'de>>()? {
                                keys.push(key);
                            }
                            return Ok(RawWriters::Keys(keys));
                        }
                    }
                }
                Ok(RawWriters::Ints(ints))
            }
        }
        d.deserialize_seq(Visitor)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVersionSet<'a> {
    #[serde(borrow)]
    txn: RawKey<'a>,
    op: u32,
    #[serde(default, borrow)]
    versions: Option<Vec<RawSeen<'a>>>,
    /// A compact version set (isocert extension, [`crate::SnapshotSet`]).
    #[serde(default, borrow)]
    snapshot: Option<RawSnapshot<'a>>,
}

/// A compact version set: the snapshot's timestamp and the rows where the rule does not hold.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSnapshot<'a> {
    visible_through: Json,
    #[serde(default, borrow)]
    except: Vec<RawSeen<'a>>,
    #[serde(default, borrow)]
    unseen: Vec<RawObject<'a>>,
}

/// An object named by table and key.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawObject<'a> {
    #[serde(default, borrow)]
    table: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    key: RawKey<'a>,
}

/// One entry of a version set: the hot part of a large certificate, read without an
/// allocation per entry (table names borrowed from the input, keys as [`RawKey`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSeen<'a> {
    #[serde(default, borrow)]
    table: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    key: RawKey<'a>,
    #[serde(borrow)]
    writer: RawKey<'a>,
}

/// A JSON scalar where a key or transaction id is expected, read without building a
/// `serde_json::Value`; what is not a usable key is kept as a message for the field's error.
#[derive(Debug)]
enum RawKey<'a> {
    Null,
    Int(i64),
    Text(std::borrow::Cow<'a, str>),
    Invalid(String),
}

impl RawKey<'_> {
    /// The key as the v1 reader reads keys: an integer or a string.
    fn scalar(&self) -> Result<Scalar, String> {
        match self {
            RawKey::Int(i) => Ok(Scalar::Int(*i)),
            RawKey::Text(t) => Ok(Scalar::Text(t.as_ref().into())),
            RawKey::Null => Err("expected an integer or a string, found null".into()),
            RawKey::Invalid(m) => Err(m.clone()),
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for RawKey<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = RawKey<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an integer or a string")
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(RawKey::Null)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(RawKey::Invalid("expected an integer or a string, found a boolean".into()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
                Ok(RawKey::Int(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
                Ok(i64::try_from(v).map(RawKey::Int).unwrap_or_else(|_| {
                    RawKey::Invalid(format!("integer {v} does not fit a signed 64-bit integer"))
                }))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
                // As the general reader's key: an integer beyond 64 bits is refused as such.
                if v.fract() == 0.0 && v.abs() >= 2f64.powi(63) {
                    return Ok(RawKey::Invalid(format!(
                        "number {v} is outside the 64-bit integer range and would lose its exact value; \
                         write it as a string"
                    )));
                }
                Ok(RawKey::Invalid("expected an integer or a string, found a float".into()))
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(RawKey::Text(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(RawKey::Text(std::borrow::Cow::Owned(v.to_string())))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(RawKey::Invalid("expected an integer or a string, found an array".into()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?.is_some() {}
                Ok(RawKey::Invalid("expected an integer or a string, found an object".into()))
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// Reads a v1 certificate for history `h`, resolving transaction ids against it.
///
/// Objects the history never mentions are interned into `h` (a predicate may have
/// evaluated rows that no operation names). A `version_sets` entry may also name an item
/// read (isocert extension): then it lists exactly one version, of the object read, the
/// version the read saw. A `transactions` list (isocert extension, as `isocert serve`
/// answers) sets each listed transaction's status and timestamps in `h`: what recovery
/// learned that the client could not record.
///
/// # Errors
/// Malformed JSON, unknown fields, unknown transaction ids, op indexes that name neither
/// a predicate operation nor an item read, and item-read entries that do not name exactly
/// one version of the object read, each with the field at fault.
pub fn read_certificate<R: Read>(input: R, h: &mut History) -> Result<Certificate, FormatError> {
    // Read whole, then parsed from memory: serde_json parses a slice several times faster
    // than an `io::Read` (a 22 MB certificate: docs/PERFORMANCE.md).
    // Guarded: a stream of NUL bytes (`/dev/zero`) is refused at its first read, not read
    // to the memory limit.
    let mut input = crate::text::TextOnly::new(input);
    let mut bytes = Vec::new();
    input.read_to_end(&mut bytes).map_err(|e| crate::text::not_text(&e).unwrap_or(FormatError::Io(e)))?;
    read_certificate_bytes(&bytes, h)
}

/// As [`read_certificate`], from the certificate's bytes in memory (a file read whole at its
/// size, without the copies of a growing buffer).
///
/// # Errors
/// As [`read_certificate`].
pub fn read_certificate_bytes(bytes: &[u8], h: &mut History) -> Result<Certificate, FormatError> {
    crate::text::check_text_prefix(bytes)?;
    crate::value::refuse_inexact_numbers(bytes)?;
    let raw: RawCertificate = serde_json::from_slice(bytes)
        .map_err(|e| FormatError::Syntax { line: e.line(), message: crate::error::json_message(&e) })?;
    check_header(&raw)?;
    let mut cert = Certificate { writer_identity: writer_identity(&raw)?, ..Certificate::default() };
    if let Some(foreign) = &raw.foreign_writers {
        add_foreign_writers(h, foreign)?;
    }
    if let Some(initial) = &raw.initial {
        h.initial = read_initial(h, initial)?;
    }
    if let Some(orders) = raw.version_order {
        cert.version_order = Some(read_version_orders(h, orders)?);
    }
    if let Some(sets) = raw.version_sets {
        let (versions, snapshots) = read_version_sets(h, sets)?;
        cert.version_sets = Some(versions);
        if !snapshots.is_empty() {
            cert.snapshot_sets = Some(snapshots);
        }
    }
    if let Some(facts) = raw.transactions {
        apply_transaction_facts(h, &facts)?;
    }
    if let Some(order) = raw.serial_order.as_deref() {
        let order: SerialOrder =
            order.parse().map_err(|e: crate::UnknownName| bad("serial_order".into(), e.to_string()))?;
        // The history's own claim stands unless the certificate's source knows less: a
        // serial order either side cannot vouch for is unknown.
        if order == SerialOrder::Unknown {
            h.serial_order = SerialOrder::Unknown;
        }
    }
    if let Some(hidden) = raw.hidden_reads {
        cert.hidden_reads = read_hidden_reads(h, &hidden)?;
    }
    if let Some(order) = raw.serialization_order {
        cert.serialization_order = Some(
            order
                .iter()
                .enumerate()
                .map(|(i, raw)| txn_of(h, raw, &|| format!("serialization_order[{i}]")))
                .collect::<Result<_, _>>()?,
        );
    }
    Ok(cert)
}

/// An invalid field of the certificate (certificates are one document: no line).
fn bad(field: String, message: String) -> FormatError {
    FormatError::invalid(0, field, message)
}

/// Resolves a transaction id of the certificate against the history; `field` names the
/// field, built only for an error (certificates list millions of entries).
fn txn_of(h: &History, raw: &RawKey<'_>, field: &dyn Fn() -> String) -> Result<TxnId, FormatError> {
    txn_named(h, raw.scalar(), field)
}

/// The history's transaction named `name` (or why the field holds no usable name).
fn txn_named(
    h: &History,
    name: Result<Scalar, String>,
    field: &dyn Fn() -> String,
) -> Result<TxnId, FormatError> {
    let name = name.map_err(|m| bad(field(), m))?;
    h.txn_by_name(&name).ok_or_else(|| bad(field(), format!("no transaction {name} in the history")))
}

/// Refuses a document that says it is not a v1 isocert certificate.
fn check_header(raw: &RawCertificate<'_>) -> Result<(), FormatError> {
    if let Some(f) = &raw.format {
        if f != "isocert-certificate" {
            return Err(bad("format".into(), format!("expected \"isocert-certificate\", found {f:?}")));
        }
    }
    if let Some(v) = raw.version {
        if v != 1 {
            return Err(bad("version".into(), format!("this isocert reads version 1, found {v}")));
        }
    }
    Ok(())
}

/// Whether a version is named by its writer (`"writer"`) or by its value (`"value"`, the default).
fn writer_identity(raw: &RawCertificate<'_>) -> Result<bool, FormatError> {
    match raw.version_identity.as_deref() {
        None | Some("value") => Ok(false),
        Some("writer") => Ok(true),
        Some(other) => {
            Err(bad("version_identity".into(), format!("expected \"writer\" or \"value\", found {other:?}")))
        }
    }
}

/// Reads `version_order`: each object's writers, oldest first; an object listed twice is refused.
fn read_version_orders(
    h: &mut History,
    orders: Vec<RawVersionOrder<'_>>,
) -> Result<FxHashMap<ObjId, Vec<TxnId>>, FormatError> {
    let mut map = FxHashMap::with_capacity_and_hasher(orders.len(), Default::default());
    for (i, o) in orders.into_iter().enumerate() {
        let table = h.intern_table(o.table.as_deref().unwrap_or(KV_TABLE));
        let key = o.key.scalar().map_err(|m| bad(format!("version_order[{i}].key"), m))?;
        let obj = h.intern_object(table, key);
        // At its length: collected through `Result`, the list grew by doubling (issue 34).
        let mut writers = Vec::with_capacity(o.writers.len());
        for w in 0..o.writers.len() {
            writers.push(txn_named(h, o.writers.scalar(w), &|| format!("version_order[{i}].writers[{w}]"))?);
        }
        if map.insert(obj, writers).is_some() {
            return Err(bad(
                format!("version_order[{i}]"),
                format!("object {} listed twice", h.object_label(obj)),
            ));
        }
    }
    Ok(map)
}

/// Version sets listed version by version, per operation.
type ListedVersionSets = FxHashMap<OpRef, Vec<SeenVersion>>;

/// Compact version sets, per operation.
type SnapshotSets = FxHashMap<OpRef, SnapshotSet>;

/// Reads `version_sets`: per operation, the versions it saw, listed or as a compact
/// snapshot (the second map); an operation listed twice is refused.
fn read_version_sets(
    h: &mut History,
    sets: Vec<RawVersionSet<'_>>,
) -> Result<(ListedVersionSets, SnapshotSets), FormatError> {
    let mut map = FxHashMap::default();
    let mut snapshots = SnapshotSets::default();
    for (i, s) in sets.into_iter().enumerate() {
        let t = txn_of(h, &s.txn, &|| format!("version_sets[{i}].txn"))?;
        let read_obj = item_read_object(h, i, t, s.op)?;
        let at = OpRef { txn: t, op: s.op };
        if snapshots.contains_key(&at) {
            return Err(bad(format!("version_sets[{i}]"), "operation listed twice".into()));
        }
        let versions = match (s.versions, s.snapshot) {
            (Some(versions), None) => versions,
            (None, Some(snap)) => {
                if read_obj.is_some() {
                    return Err(bad(
                        format!("version_sets[{i}].snapshot"),
                        format!(
                            "operation {} of {} is an item read: it names its version in `versions`",
                            s.op,
                            h.txn_label(t)
                        ),
                    ));
                }
                if map.contains_key(&at) {
                    return Err(bad(format!("version_sets[{i}]"), "operation listed twice".into()));
                }
                let snap = read_snapshot(h, &snap, &|| format!("version_sets[{i}].snapshot"))?;
                snapshots.insert(at, snap);
                continue;
            }
            (Some(_), Some(_)) => {
                return Err(bad(
                    format!("version_sets[{i}]"),
                    "has both `versions` and `snapshot`: give one".into(),
                ))
            }
            (None, None) => {
                return Err(bad(format!("version_sets[{i}]"), "needs `versions` (or `snapshot`)".into()))
            }
        };
        let seen = read_seen_versions(h, i, at, read_obj, &versions)?;
        if map.insert(at, seen).is_some() {
            return Err(bad(format!("version_sets[{i}]"), "operation listed twice".into()));
        }
    }
    Ok((map, snapshots))
}

/// The object an item read reads, `None` for a predicate operation; entry `i` naming
/// any other operation is refused.
fn item_read_object(h: &History, i: usize, t: TxnId, op: u32) -> Result<Option<ObjId>, FormatError> {
    match h.txn(t).ops.get(op as usize) {
        Some(Op::Read { obj, .. }) => Ok(Some(*obj)),
        Some(op) if op.predicate().is_some() => Ok(None),
        _ => Err(bad(
            format!("version_sets[{i}].op"),
            format!(
                "operation {op} of {} is not an item read, select, update, delete or aggregate",
                h.txn_label(t)
            ),
        )),
    }
}

/// Reads the listed versions of entry `i` (operation `at`): an item read (`read_obj`) names
/// exactly one version, of the object it reads; no object is listed twice.
fn read_seen_versions(
    h: &mut History,
    i: usize,
    at: OpRef,
    read_obj: Option<ObjId>,
    versions: &[RawSeen<'_>],
) -> Result<Vec<SeenVersion>, FormatError> {
    if read_obj.is_some() && versions.len() != 1 {
        return Err(bad(
            format!("version_sets[{i}].versions"),
            format!(
                "operation {} of {} is an item read, so it names exactly one version, not {}",
                at.op,
                h.txn_label(at.txn),
                versions.len()
            ),
        ));
    }
    let mut seen = Vec::with_capacity(versions.len());
    let mut listed: FxHashMap<ObjId, usize> = FxHashMap::default();
    for (v, raw) in versions.iter().enumerate() {
        let field = || format!("version_sets[{i}].versions[{v}]");
        let table = h.intern_table(raw.table.as_deref().unwrap_or(KV_TABLE));
        let key = raw.key.scalar().map_err(|m| bad(format!("{}.key", field()), m))?;
        let obj = h.intern_object(table, key);
        if let Some(read) = read_obj.filter(|&read| read != obj) {
            return Err(bad(
                field(),
                format!(
                    "operation {} of {} reads {}, not {}",
                    at.op,
                    h.txn_label(at.txn),
                    h.object_label(read),
                    h.object_label(obj)
                ),
            ));
        }
        let writer = match &raw.writer {
            RawKey::Null => Writer::Initial,
            other => Writer::Txn(txn_of(h, other, &|| format!("{}.writer", field()))?),
        };
        if let Some(first) = listed.insert(obj, v) {
            // Which of two versions the read saw would depend on the entries' order.
            return Err(bad(
                field(),
                format!(
                    "{} is listed twice in the version set of operation {} of {} (also at versions[{first}])",
                    h.object_label(obj),
                    at.op,
                    h.txn_label(at.txn)
                ),
            ));
        }
        seen.push(SeenVersion { obj, writer });
    }
    Ok(seen)
}

/// Applies `transactions`: the status and timestamps recovery learned, set in the history.
fn apply_transaction_facts(h: &mut History, facts: &[RawTxnFacts]) -> Result<(), FormatError> {
    for (i, f) in facts.iter().enumerate() {
        let t = txn_named(h, j::key(&f.txn), &|| format!("transactions[{i}].txn"))?;
        let status = match f.status.as_deref() {
            None => None,
            Some("committed") => Some(crate::Status::Committed),
            Some("aborted") => Some(crate::Status::Aborted),
            Some("unknown") => Some(crate::Status::Unknown),
            Some(other) => {
                return Err(bad(
                    format!("transactions[{i}].status"),
                    format!("expected committed, aborted or unknown, found {other:?}"),
                ))
            }
        };
        let ts = |json: &Option<Json>, field: &str| {
            json.as_ref()
                .map(|j| super::read::timestamp(j).map_err(|m| bad(format!("transactions[{i}].{field}"), m)))
                .transpose()
        };
        let (start_ts, commit_ts) = (ts(&f.start_ts, "start_ts")?, ts(&f.commit_ts, "commit_ts")?);
        let t = &mut h.txns[t.index()];
        if let Some(status) = status {
            t.status = status;
        }
        t.set_start_ts(start_ts.or(t.start_ts()));
        t.set_commit_ts(commit_ts.or(t.commit_ts()));
    }
    Ok(())
}

/// Reads a compact version set; `field` names the entry.
fn read_snapshot(
    h: &mut History,
    raw: &RawSnapshot<'_>,
    field: &dyn Fn() -> String,
) -> Result<SnapshotSet, FormatError> {
    let visible_through = super::read::timestamp(&raw.visible_through)
        .map_err(|m| bad(format!("{}.visible_through", field()), m))?;
    let mut listed: FxHashSet<ObjId> = FxHashSet::default();
    let mut object =
        |h: &mut History, table: &Option<std::borrow::Cow<'_, str>>, key: &RawKey<'_>, at: String| {
            let table = h.intern_table(table.as_deref().unwrap_or(KV_TABLE));
            let key = key.scalar().map_err(|m| bad(format!("{at}.key"), m))?;
            let obj = h.intern_object(table, key);
            if !listed.insert(obj) {
                return Err(bad(
                    at,
                    format!("{} is listed twice in the snapshot's exceptions", h.object_label(obj)),
                ));
            }
            Ok(obj)
        };
    let mut except = Vec::with_capacity(raw.except.len());
    for (e, seen) in raw.except.iter().enumerate() {
        let at = || format!("{}.except[{e}]", field());
        let obj = object(h, &seen.table, &seen.key, at())?;
        let writer = match &seen.writer {
            RawKey::Null => Writer::Initial,
            other => Writer::Txn(txn_of(h, other, &|| format!("{}.writer", at()))?),
        };
        except.push(SeenVersion { obj, writer });
    }
    let mut unseen = Vec::with_capacity(raw.unseen.len());
    for (u, o) in raw.unseen.iter().enumerate() {
        unseen.push(object(h, &o.table, &o.key, format!("{}.unseen[{u}]", field()))?);
    }
    Ok(SnapshotSet { visible_through, except, unseen })
}

/// The `hidden_reads` extension: each names an operation of the history and a reason.
fn read_hidden_reads(h: &History, hidden: &[RawHiddenRead]) -> Result<Vec<HiddenRead>, FormatError> {
    let mut out = Vec::with_capacity(hidden.len());
    for (i, r) in hidden.iter().enumerate() {
        let txn = txn_named(h, j::key(&r.txn), &|| format!("hidden_reads[{i}].txn"))?;
        if r.op as usize >= h.txn(txn).ops.len() {
            return Err(bad(
                format!("hidden_reads[{i}].op"),
                format!("{} has no operation {}", h.txn_label(txn), r.op),
            ));
        }
        let why = HiddenReason::from_name(&r.why).ok_or_else(|| {
            bad(
                format!("hidden_reads[{i}].why"),
                format!("{:?} is neither value-written-outside nor predicate-over-hidden", r.why),
            )
        })?;
        out.push(HiddenRead { at: OpRef { txn, op: r.op }, why });
    }
    Ok(out)
}

/// The `initial` extension: each object's initial version, its value or (without one) the
/// opaque stand-in; an object not listed starts unborn.
fn read_initial(h: &mut History, initial: &[RawForeignWrite]) -> Result<Vec<(ObjId, ValueId)>, FormatError> {
    let bad = |field: String, message: String| FormatError::invalid(0, field, message);
    let mut out: Vec<(ObjId, ValueId)> = Vec::with_capacity(initial.len());
    let mut listed = FxHashSet::default();
    for (i, entry) in initial.iter().enumerate() {
        let field = format!("initial[{i}]");
        let table = h.intern_table(entry.table.as_deref().unwrap_or(KV_TABLE));
        let key = j::key(&entry.key).map_err(|m| bad(format!("{field}.key"), m))?;
        let obj = h.intern_object(table, key);
        if !listed.insert(obj) {
            return Err(bad(format!("{field}.key"), "object listed twice in initial".into()));
        }
        let value = match &entry.value {
            None => crate::opaque_value(h, obj),
            Some(v) => j::value(h, table, v).map_err(|m| bad(format!("{field}.value"), m))?,
        };
        out.push((obj, value));
    }
    Ok(out)
}

/// Adds a committed transaction of its own session for each foreign writer (see
/// [`ForeignWriter`]), writing the given values or the opaque stand-in.
fn add_foreign_writers(h: &mut History, foreign: &[RawForeign]) -> Result<(), FormatError> {
    let bad = |field: String, message: String| FormatError::invalid(0, field, message);
    for (i, f) in foreign.iter().enumerate() {
        let name = Scalar::Text(f.id.as_str().into());
        if !f.id.starts_with('~') {
            return Err(bad(format!("foreign_writers[{i}].id"), format!("{:?} does not start with ~", f.id)));
        }
        let mut ops = Vec::with_capacity(f.writes.len());
        for (w, write) in f.writes.iter().enumerate() {
            let field = format!("foreign_writers[{i}].writes[{w}]");
            let table = h.intern_table(write.table.as_deref().unwrap_or(KV_TABLE));
            let key = j::key(&write.key).map_err(|m| bad(format!("{field}.key"), m))?;
            let obj = h.intern_object(table, key);
            let value = match &write.value {
                None => crate::opaque_value(h, obj),
                Some(v) => j::value(h, table, v).map_err(|m| bad(format!("{field}.value"), m))?,
            };
            ops.push(Op::Write { obj, value });
        }
        let session = h.intern_session(name.clone());
        if h.push_txn(Transaction::new(name, session, ops)).is_err() {
            return Err(bad(
                format!("foreign_writers[{i}].id"),
                format!("the history already has a transaction {:?}", f.id),
            ));
        }
    }
    Ok(())
}

/// Writes a certificate as one JSON document (objects and version sets sorted, so the
/// output is stable).
///
/// # Errors
/// I/O errors of `out`.
pub fn write_certificate<W: Write>(h: &History, cert: &Certificate, out: &mut W) -> Result<(), FormatError> {
    write_certificate_doc(h, cert, None, &[], None, out)
}

/// Writes a certificate as [`write_certificate`] does, plus the `transactions` extension
/// for `txns` (each one's status and timestamps as `h` holds them after recovery, so that
/// a reader of the history as its client recorded it learns them, with `serial_order` when
/// `h`'s is unknown, so that the timestamps are not read as a serial order they are not), the
/// `foreign_writers` extension and, when given, the `initial` extension: each object's
/// initial version with its value, or `None` for the opaque stand-in (what `isocert serve`
/// answers).
///
/// # Errors
/// I/O errors of `out`.
pub fn write_certificate_with_facts<W: Write>(
    h: &History,
    cert: &Certificate,
    txns: &[TxnId],
    foreign: &[ForeignWriter],
    initial: Option<&[(ObjId, Option<ValueId>)]>,
    out: &mut W,
) -> Result<(), FormatError> {
    write_certificate_doc(h, cert, Some(txns), foreign, initial, out)
}

fn write_certificate_doc<W: Write>(
    h: &History,
    cert: &Certificate,
    facts: Option<&[TxnId]>,
    foreign: &[ForeignWriter],
    initial: Option<&[(ObjId, Option<ValueId>)]>,
    out: &mut W,
) -> Result<(), FormatError> {
    let obj_json = |obj, m: &mut serde_json::Map<String, Json>| {
        let o = h.object(obj);
        let table = &h.table(o.table).name;
        if &**table != KV_TABLE {
            m.insert("table".into(), table.to_string().into());
        }
        m.insert("key".into(), o.key.to_json());
    };
    let name = |t: TxnId| h.txn(t).name.to_json();
    let mut doc = serde_json::Map::new();
    doc.insert("format".into(), "isocert-certificate".into());
    doc.insert("version".into(), 1.into());
    if cert.writer_identity {
        doc.insert("version_identity".into(), "writer".into());
    }
    if !foreign.is_empty() {
        let list: Vec<Json> = foreign
            .iter()
            .map(|f| {
                let writes: Vec<Json> = f
                    .writes
                    .iter()
                    .map(|(obj, value)| {
                        let mut m = serde_json::Map::new();
                        obj_json(*obj, &mut m);
                        if let Some(v) = value {
                            m.insert("value".into(), j::value_to_json(h, h.object(*obj).table, *v));
                        }
                        Json::Object(m)
                    })
                    .collect();
                json!({"id": name(f.txn), "writes": writes})
            })
            .collect();
        doc.insert("foreign_writers".into(), Json::Array(list));
    }
    if let Some(initial) = initial {
        let mut sorted = initial.to_vec();
        sorted.sort_unstable_by_key(|(obj, _)| *obj);
        let list: Vec<Json> = sorted
            .iter()
            .map(|&(obj, value)| {
                let mut m = serde_json::Map::new();
                obj_json(obj, &mut m);
                if let Some(v) = value {
                    m.insert("value".into(), j::value_to_json(h, h.object(obj).table, v));
                }
                Json::Object(m)
            })
            .collect();
        doc.insert("initial".into(), Json::Array(list));
    }
    if !cert.hidden_reads.is_empty() {
        let mut marks = cert.hidden_reads.clone();
        marks.sort_unstable();
        let list: Vec<Json> = marks
            .iter()
            .map(|r| json!({"txn": name(r.at.txn), "op": r.at.op, "why": r.why.as_str()}))
            .collect();
        doc.insert("hidden_reads".into(), Json::Array(list));
    }
    if let Some(vo) = &cert.version_order {
        let mut objs: Vec<_> = vo.iter().collect();
        objs.sort_by_key(|(o, _)| **o);
        let list: Vec<Json> = objs
            .into_iter()
            .map(|(&obj, writers)| {
                let mut m = serde_json::Map::new();
                obj_json(obj, &mut m);
                m.insert("writers".into(), Json::Array(writers.iter().map(|&t| name(t)).collect()));
                Json::Object(m)
            })
            .collect();
        doc.insert("version_order".into(), Json::Array(list));
    }
    if cert.version_sets.is_some() || cert.snapshot_sets.is_some() {
        let seen_json = |s: &SeenVersion| {
            let mut m = serde_json::Map::new();
            obj_json(s.obj, &mut m);
            m.insert("writer".into(), s.writer.txn().map(name).unwrap_or(Json::Null));
            Json::Object(m)
        };
        let mut ops: Vec<(OpRef, Json)> = Vec::new();
        for (r, seen) in cert.version_sets.iter().flatten() {
            let versions: Vec<Json> = seen.iter().map(seen_json).collect();
            ops.push((*r, json!({"txn": name(r.txn), "op": r.op, "versions": versions})));
        }
        for (r, snap) in cert.snapshot_sets.iter().flatten() {
            let mut m = serde_json::Map::new();
            m.insert("visible_through".into(), snap.visible_through.to_json());
            if !snap.except.is_empty() {
                m.insert("except".into(), Json::Array(snap.except.iter().map(seen_json).collect()));
            }
            if !snap.unseen.is_empty() {
                let unseen = snap
                    .unseen
                    .iter()
                    .map(|&obj| {
                        let mut o = serde_json::Map::new();
                        obj_json(obj, &mut o);
                        Json::Object(o)
                    })
                    .collect();
                m.insert("unseen".into(), Json::Array(unseen));
            }
            ops.push((*r, json!({"txn": name(r.txn), "op": r.op, "snapshot": Json::Object(m)})));
        }
        ops.sort_by_key(|(r, _)| *r);
        doc.insert("version_sets".into(), Json::Array(ops.into_iter().map(|(_, j)| j).collect()));
    }
    if let Some(order) = &cert.serialization_order {
        doc.insert("serialization_order".into(), Json::Array(order.iter().map(|&t| name(t)).collect()));
    }
    if let Some(txns) = facts {
        // The header's rule: `commit_ts` is the default, written by leaving the field out.
        if h.serial_order == SerialOrder::Unknown {
            doc.insert("serial_order".into(), h.serial_order.as_str().into());
        }
        let list: Vec<Json> = txns
            .iter()
            .map(|&t| {
                let txn = h.txn(t);
                let mut m = serde_json::Map::new();
                m.insert("txn".into(), name(t));
                m.insert("status".into(), txn.status.as_str().into());
                if let Some(ts) = txn.start_ts() {
                    m.insert("start_ts".into(), ts.to_json());
                }
                if let Some(ts) = txn.commit_ts() {
                    m.insert("commit_ts".into(), ts.to_json());
                }
                Json::Object(m)
            })
            .collect();
        doc.insert("transactions".into(), Json::Array(list));
    }
    serde_json::to_writer(&mut *out, &Json::Object(doc)).map_err(std::io::Error::from)?;
    out.write_all(b"\n")?;
    Ok(())
}
