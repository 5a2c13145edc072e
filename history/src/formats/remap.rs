//! Carries a certificate across a conversion (`isocert convert --certificate-out`): which
//! transaction of the written (and read back) history is which transaction of the input.
//!
//! Formats name sessions and transactions differently: Cobra's logs keep the ids but are read
//! back in file-name order (`T0.log`, `T1.log`, ...), dbcop's number sessions and
//! transactions anew, and most foreign formats leave out aborted transactions. Pairing
//! sessions by first appearance (the old rule) paired the wrong transactions when the order
//! changed, and refused every conversion that dropped an aborted transaction. Here a pairing
//! is accepted only when every paired committed transaction has the same operations (same
//! kinds, objects and values), trying in turn: the transactions' own ids, the sessions'
//! names, the sessions' order. Only transactions that did not commit may be left out or
//! lose operations (their certificate entries are then dropped), and the written history
//! may hold aborted transactions of its own (AWDIT's text gathers aborted writes into one
//! transaction `-1`); a committed transaction that has no twin is an error. A read of the
//! initial version matches whatever value each format gives that version (0 in dbcop's and
//! Plume's formats, an absent row in v1).

use rustc_hash::FxHashMap;

use crate::{
    Certificate, FormatError, HiddenRead, History, ObjId, Op, OpRef, SeenVersion, SessionId, TxnId, Value,
    ValueId, Writer,
};

/// The error of a pairing or remapping that fails.
fn fail(message: String) -> FormatError {
    FormatError::Invalid { line: 0, field: "certificate".into(), message }
}

type Result<T> = std::result::Result<T, FormatError>;

/// How an input transaction is kept in the written history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kept {
    /// Its twin, with the same operations at the same indexes.
    Same(TxnId),
    /// Its twin, whose operations differ (a transaction that did not commit, some of whose
    /// reads the format leaves out): its version sets are dropped.
    Changed(TxnId),
}

impl Kept {
    fn txn(self) -> TxnId {
        match self {
            Kept::Same(t) | Kept::Changed(t) => t,
        }
    }
}

/// Input transaction to written transaction; an input transaction missing from the map was
/// left out (it did not commit).
type Pairing = FxHashMap<TxnId, Kept>;

/// `cert`, a certificate of `from`, for the same history as written and read back (`to`).
///
/// # Errors
/// When no pairing keeps every committed transaction's operations, or the certificate names
/// an object or committed transaction the written history lacks.
pub fn remap_certificate(from: &History, to: &History, cert: &Certificate) -> Result<Certificate> {
    // Other formats list version sets row by row: compact ones are expanded first.
    let expanded;
    let cert = if cert.snapshot_sets.is_some() {
        let mut c = cert.clone();
        c.expand_snapshot_sets(from).map_err(|e| fail(e.to_string()))?;
        expanded = c;
        &expanded
    } else {
        cert
    };
    let pairing = pair_transactions(from, to)?;
    let obj = |o: ObjId| -> Result<ObjId> {
        let key = from.object(o);
        to.table_by_name(&from.table(key.table).name)
            .and_then(|t| to.object_by_key(t, &key.key))
            .ok_or_else(|| fail(format!("object {} is not in the written history", from.object_label(o))))
    };
    let committed = |x: TxnId| {
        pairing
            .get(&x)
            .map(|k| k.txn())
            .ok_or_else(|| fail(format!("{} has no counterpart", from.txn_label(x))))
    };
    let writer = |w: Writer| -> Result<Writer> {
        Ok(match w {
            Writer::Initial => Writer::Initial,
            Writer::Txn(x) => Writer::Txn(committed(x)?),
        })
    };
    let version_order = match &cert.version_order {
        Some(order) => Some(
            order
                .iter()
                .map(|(o, ws)| Ok((obj(*o)?, ws.iter().map(|w| committed(*w)).collect::<Result<Vec<_>>>()?)))
                .collect::<Result<FxHashMap<_, _>>>()?,
        ),
        None => None,
    };
    let version_sets = match &cert.version_sets {
        Some(sets) => {
            let mut out = FxHashMap::default();
            for (at, seen) in sets {
                let txn = match pairing.get(&at.txn) {
                    Some(Kept::Same(t)) => *t,
                    // Left out or changed: only a transaction that did not commit can be.
                    _ => continue,
                };
                let seen = seen
                    .iter()
                    .map(|s| Ok(SeenVersion { obj: obj(s.obj)?, writer: writer(s.writer)? }))
                    .collect::<Result<Vec<_>>>()?;
                out.insert(OpRef { txn, op: at.op }, seen);
            }
            Some(out)
        }
        None => None,
    };
    let serialization_order = match &cert.serialization_order {
        Some(order) => Some(
            order
                .iter()
                .filter(|x| needs_twin(from, **x) || pairing.contains_key(x))
                .map(|x| committed(*x))
                .collect::<Result<Vec<_>>>()?,
        ),
        None => None,
    };
    Ok(Certificate {
        version_order,
        version_sets,
        serialization_order,
        snapshot_sets: None,
        writer_identity: cert.writer_identity,
        // Kept where the marked operation's transaction is kept as it was; a transaction
        // left out or changed did not commit, and no check rests on its reads.
        hidden_reads: cert
            .hidden_reads
            .iter()
            .filter_map(|r| match pairing.get(&r.at.txn) {
                Some(Kept::Same(t)) => Some(HiddenRead { at: OpRef { txn: *t, op: r.at.op }, why: r.why }),
                _ => None,
            })
            .collect(),
    })
}

/// Pairs the transactions of `from` with those of `to` (see the module doc).
fn pair_transactions(from: &History, to: &History) -> Result<Pairing> {
    let (from, to) = (Side::new(from), Side::new(to));
    if let Some(pairing) = pair_by_id(&from, &to) {
        return Ok(pairing);
    }
    let (a, b) = (sessions(from.h), sessions(to.h));
    if let Ok(pairing) = pair_by_session_name(&from, &to, &a, &b) {
        return Ok(pairing);
    }
    pair_by_session_order(&from, &to, &a, &b)
}

/// Every transaction of `to` is the one of `from` with its id, and every committed one of
/// `from` is kept: the formats that keep ids (v1, Cobra, Chronos).
fn pair_by_id(from: &Side<'_>, to: &Side<'_>) -> Option<Pairing> {
    let mut pairing = Pairing::default();
    for y in to.h.txn_ids() {
        let twin = from.h.txn_by_name(&to.h.txn(y).name).and_then(|x| Some((x, compare(from, x, to, y)?)));
        match twin {
            Some((x, kept)) => {
                if pairing.insert(x, kept).is_some() {
                    return None;
                }
            }
            // A transaction of the format's own that did not commit (AWDIT's `-1` holds
            // every aborted write) names no version of the certificate.
            None if !to.h.txn(y).is_committed() => {}
            None => return None,
        }
    }
    from.h.txn_ids().all(|x| pairing.contains_key(&x) || !needs_twin(from.h, x)).then_some(pairing)
}

/// Sessions paired by name (formats that keep session names but read them back in another
/// order, as Cobra's `T<n>.log` files are).
fn pair_by_session_name(
    from: &Side<'_>,
    to: &Side<'_>,
    a: &[(SessionId, Vec<TxnId>)],
    b: &[(SessionId, Vec<TxnId>)],
) -> Result<Pairing> {
    let mut pairing = Pairing::default();
    let mut used = vec![false; a.len()];
    for (session, ys) in b {
        let name = to.h.session_name(*session);
        let i = a
            .iter()
            .position(|(s, _)| from.h.session_name(*s) == name)
            .ok_or_else(|| fail(format!("session {name} is not in the input")))?;
        used[i] = true;
        pair_session(from, to, &a[i].1, ys, &mut pairing)?;
    }
    for (i, (_, xs)) in a.iter().enumerate() {
        if !used[i] {
            ensure_dropped(from, xs)?;
        }
    }
    Ok(pairing)
}

/// Sessions paired in order of first appearance, skipping input sessions that committed
/// nothing (formats that number sessions anew).
fn pair_by_session_order(
    from: &Side<'_>,
    to: &Side<'_>,
    a: &[(SessionId, Vec<TxnId>)],
    b: &[(SessionId, Vec<TxnId>)],
) -> Result<Pairing> {
    let mut pairing = Pairing::default();
    let mut inputs = a.iter();
    for (_, ys) in b {
        loop {
            let (_, xs) = inputs.next().ok_or_else(|| {
                fail(format!("the written history has {} sessions, more than the input keeps", b.len()))
            })?;
            let mut attempt = Pairing::default();
            match pair_session(from, to, xs, ys, &mut attempt) {
                Ok(()) => {
                    pairing.extend(attempt);
                    break;
                }
                Err(e) if xs.iter().any(|x| needs_twin(from.h, *x)) => return Err(e),
                // A session that committed nothing may be left out whole.
                Err(_) => {}
            }
        }
    }
    for (_, xs) in inputs {
        ensure_dropped(from, xs)?;
    }
    Ok(pairing)
}

/// Pairs one session's transactions in order: a transaction that did not commit may be
/// left out on either side; a committed one must have its twin next.
fn pair_session(from: &Side<'_>, to: &Side<'_>, xs: &[TxnId], ys: &[TxnId], out: &mut Pairing) -> Result<()> {
    let mut next = 0;
    for &x in xs {
        loop {
            let Some(&y) = ys.get(next) else {
                if needs_twin(from.h, x) {
                    return Err(fail(format!(
                        "{} (session {}) is not in the written history",
                        from.h.txn_label(x),
                        from.h.session_name(from.h.txn(x).session)
                    )));
                }
                break;
            };
            if let Some(kept) = compare(from, x, to, y) {
                out.insert(x, kept);
                next += 1;
                break;
            }
            if !needs_twin(from.h, x) {
                break;
            }
            if to.h.txn(y).is_committed() {
                return Err(fail(format!(
                    "{} (session {}) has no twin with the same operations",
                    from.h.txn_label(x),
                    from.h.session_name(from.h.txn(x).session)
                )));
            }
            next += 1;
        }
    }
    if let Some(y) = ys[next.min(ys.len())..].iter().find(|y| to.h.txn(**y).is_committed()) {
        return Err(fail(format!(
            "{} of the written history has no counterpart in the input",
            to.h.txn_label(*y)
        )));
    }
    Ok(())
}

/// Whether transaction `x` of the input must be in the written history: a committed one
/// with operations (formats other than v1 leave empty transactions out, and a
/// transaction that did not commit may be left out).
fn needs_twin(h: &History, x: TxnId) -> bool {
    let t = h.txn(x);
    t.is_committed() && !t.ops.is_empty()
}

fn ensure_dropped(from: &Side<'_>, xs: &[TxnId]) -> Result<()> {
    match xs.iter().find(|x| needs_twin(from.h, **x)) {
        Some(x) => {
            Err(fail(format!("committed transaction {} is not in the written history", from.h.txn_label(*x))))
        }
        None => Ok(()),
    }
}

/// A history with its initial versions by object: a read of the initial version matches
/// one in the other history whatever value each format gives it (dbcop's and Plume's
/// initial value is 0 where v1's is an absent row).
struct Side<'a> {
    h: &'a History,
    initial: FxHashMap<ObjId, ValueId>,
}

impl<'a> Side<'a> {
    fn new(h: &'a History) -> Self {
        Side { h, initial: h.initial.iter().copied().collect() }
    }

    /// The value, or `None` for the object's initial version.
    fn version(&self, obj: ObjId, value: ValueId) -> Option<std::result::Result<Value, String>> {
        let initial = self.initial.get(&obj).copied().unwrap_or(ValueId::ABSENT);
        if value == initial {
            return None;
        }
        Some(match self.h.value(value) {
            Value::Row(_) => Err(self.h.value_label(obj, value)),
            other => Ok(other.clone()),
        })
    }
}

/// Whether `y` of `to` is `x` of `from`: the same status and operations, or (for a
/// transaction that did not commit) the same status and writes.
fn compare(from: &Side<'_>, x: TxnId, to: &Side<'_>, y: TxnId) -> Option<Kept> {
    let (tx, ty) = (from.h.txn(x), to.h.txn(y));
    if tx.is_committed() != ty.is_committed() {
        return None;
    }
    let same = |ox: &Op, oy: &Op| same_op(from, ox, to, oy);
    if tx.ops.len() == ty.ops.len() && tx.ops.iter().zip(&ty.ops).all(|(a, b)| same(a, b)) {
        return Some(Kept::Same(y));
    }
    if tx.is_committed() {
        return None;
    }
    let writes = |ops: &[Op]| ops.iter().filter(|o| o.is_write()).cloned().collect::<Vec<_>>();
    let (wx, wy) = (writes(&tx.ops), writes(&ty.ops));
    (wx.len() == wy.len() && wx.iter().zip(&wy).all(|(a, b)| same(a, b))).then_some(Kept::Changed(y))
}

/// Whether two operations of two histories are the same: kind, object (table name and key)
/// and version (the initial one, or the same value); predicate operations by kind,
/// predicate text and number of rows.
fn same_op(from: &Side<'_>, a: &Op, to: &Side<'_>, b: &Op) -> bool {
    let object = |side: &Side<'_>, o: ObjId| {
        let key = side.h.object(o);
        (side.h.table(key.table).name.clone(), key.key.clone())
    };
    let predicate = |side: &Side<'_>, op: &Op| op.predicate().map(|p| side.h.predicate(p).sql.clone());
    match (a, b) {
        (Op::Read { obj: oa, value: va }, Op::Read { obj: ob, value: vb })
        | (Op::Write { obj: oa, value: va }, Op::Write { obj: ob, value: vb }) => {
            object(from, *oa) == object(to, *ob) && from.version(*oa, *va) == to.version(*ob, *vb)
        }
        (Op::Append { obj: oa, element: ea }, Op::Append { obj: ob, element: eb }) => {
            object(from, *oa) == object(to, *ob) && ea == eb
        }
        (Op::Select { rows: ra, .. }, Op::Select { rows: rb, .. })
        | (Op::Update { rows: ra, .. }, Op::Update { rows: rb, .. })
        | (Op::Delete { rows: ra, .. }, Op::Delete { rows: rb, .. }) => {
            ra.len() == rb.len() && predicate(from, a) == predicate(to, b)
        }
        (Op::Aggregate { result: ra, .. }, Op::Aggregate { result: rb, .. }) => {
            ra == rb && predicate(from, a) == predicate(to, b)
        }
        _ => false,
    }
}

/// The sessions of `h` in order of first appearance, each with its transactions in order.
fn sessions(h: &History) -> Vec<(SessionId, Vec<TxnId>)> {
    let mut index: FxHashMap<SessionId, usize> = FxHashMap::default();
    let mut sessions: Vec<(SessionId, Vec<TxnId>)> = Vec::new();
    for t in h.txn_ids() {
        let s = h.txn(t).session;
        let i = *index.entry(s).or_insert_with(|| {
            sessions.push((s, Vec::new()));
            sessions.len() - 1
        });
        sessions[i].1.push(t);
    }
    sessions
}
