//! Jepsen operations (as [`Edn`], whether read from EDN or elle-cli JSON) into the model and
//! back.
//!
//! Invocations pair with the next completion of the same process: `:ok` commits, `:fail`
//! aborts, `:info` (and an invocation that never completes) is unknown. The completion's
//! value holds what reads observed; the reads of failed and unknown transactions were not
//! observed and are left out (counted in the notes). Operations of non-integer processes
//! (`:nemesis`) are skipped. `{:f :init, :value {k v}}` (Elle closed predicates) sets the
//! initial versions.

use rustc_hash::FxHashMap;

use super::edn::Edn;
use crate::model::KV_TABLE;
use crate::{
    FormatError, History, Op, RealTime, ResultRow, Scalar, Status, TableId, Transaction, Value, ValueId,
};

/// The extra key isocert writes to keep its transaction ids through Jepsen histories.
pub(crate) const TXN_KEY: &str = "isocert/txn";
/// The process of an operation map without `:process` (invocations and completions still
/// pair up); each such transaction gets a session of its own.
const NO_PROCESS: i64 = i64::MIN;

/// The extra key isocert writes for a session whose name is not the process number.
pub(crate) const SESSION_KEY: &str = "isocert/session";

struct Pending {
    line: usize,
    index: Option<i64>,
    f: String,
    value: Edn,
    name: Option<Scalar>,
    session: Option<Scalar>,
    /// Jepsen's `:time` of the invocation (nanoseconds since the test started).
    time: Option<i64>,
}

/// Builds a [`History`] from Jepsen operations pushed in file order.
pub(crate) struct ElleBuilder {
    h: History,
    kv: TableId,
    pending: FxHashMap<i64, Pending>,
    counter: i64,
    unobserved_reads: usize,
    unmatched_info: usize,
}

impl ElleBuilder {
    pub(crate) fn new() -> Self {
        let mut h = History::new();
        let kv = h.intern_table(KV_TABLE);
        ElleBuilder {
            h,
            kv,
            pending: FxHashMap::default(),
            counter: 0,
            unobserved_reads: 0,
            unmatched_info: 0,
        }
    }

    /// Adds one operation map that starts on `line`.
    pub(crate) fn push(&mut self, line: usize, mut op: Edn) -> Result<(), FormatError> {
        let bad = |field: &str, m: String| FormatError::invalid(line, field, m);
        // Newer Jepsen writes operations as records: `#jepsen.history.Op{:index 0 ...}`.
        if let Edn::Tagged(_, inner) = op {
            op = *inner;
        }
        if !matches!(op, Edn::Map(_)) {
            return Err(bad("operation", format!("expected a map, found {}", op.kind())));
        }
        let value = take(&mut op, "value").unwrap_or(Edn::Nil);
        let process = match op.get("process") {
            Some(Edn::Int(p)) => *p,
            Some(Edn::Keyword(_) | Edn::Str(_)) => return Ok(()),
            None => NO_PROCESS,
            Some(other) => {
                return Err(bad("process", format!("expected an integer, found {}", other.kind())))
            }
        };
        let kind = match op.get("type") {
            Some(Edn::Keyword(t) | Edn::Str(t)) => t.as_str(),
            Some(other) => return Err(bad("type", format!("expected a keyword, found {}", other.kind()))),
            None => return Err(bad("type", "missing".into())),
        };
        let index = match op.get("index") {
            Some(Edn::Int(i)) => Some(*i),
            None | Some(Edn::Nil) => None,
            Some(other) => return Err(bad("index", format!("expected an integer, found {}", other.kind()))),
        };
        let f = match op.get("f") {
            Some(Edn::Keyword(f) | Edn::Str(f)) => f.clone(),
            None => "txn".to_string(),
            Some(other) => return Err(bad("f", format!("expected a keyword, found {}", other.kind()))),
        };
        let name = op.get(TXN_KEY).map(|v| scalar(v).map_err(|m| bad(TXN_KEY, m))).transpose()?;
        let session = op.get(SESSION_KEY).map(|v| scalar(v).map_err(|m| bad(SESSION_KEY, m))).transpose()?;
        let time = match op.get("time") {
            Some(Edn::Int(t)) => Some(*t),
            None | Some(Edn::Nil) => None,
            Some(other) => return Err(bad("time", format!("expected an integer, found {}", other.kind()))),
        };
        match kind {
            "invoke" => {
                if let Some(p) = self.pending.get(&process) {
                    let who = match process {
                        NO_PROCESS => "an operation without :process".to_string(),
                        p => format!("process {p}"),
                    };
                    return Err(bad(
                        "process",
                        format!("{who} invokes again before its invocation on line {} completed", p.line),
                    ));
                }
                self.pending.insert(process, Pending { line, index, f, value, name, session, time });
                Ok(())
            }
            "ok" | "fail" | "info" => {
                let status = match kind {
                    "ok" => Status::Committed,
                    "fail" => Status::Aborted,
                    _ => Status::Unknown,
                };
                let Some(inv) = self.pending.remove(&process) else {
                    // Histories filtered to completions (Viper's Jepsen logs keep only `:ok`
                    // lines) carry each transaction whole in its completion.
                    if kind == "info" {
                        self.unmatched_info += 1;
                        return Ok(());
                    }
                    return self.complete(line, process, index, &f, status, &value, name, session, None);
                };
                if inv.f != f {
                    return Err(bad(
                        "f",
                        format!("completion :{f} of an invocation :{} (line {})", inv.f, inv.line),
                    ));
                }
                let value = if status == Status::Committed { value } else { inv.value };
                let name = name.or(inv.name.clone());
                let session = session.or(inv.session.clone());
                let real_time = real_time(line, inv.time, time, status)?;
                self.complete(
                    line,
                    process,
                    index.or(inv.index),
                    &f,
                    status,
                    &value,
                    name,
                    session,
                    real_time,
                )
            }
            other => Err(bad("type", format!("unknown type :{other} (invoke, ok, fail, info)"))),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn complete(
        &mut self,
        line: usize,
        process: i64,
        index: Option<i64>,
        f: &str,
        status: Status,
        value: &Edn,
        name: Option<Scalar>,
        session: Option<Scalar>,
        real_time: Option<RealTime>,
    ) -> Result<(), FormatError> {
        let bad = |field: String, m: String| FormatError::invalid(line, field, m);
        match f {
            "init" => {
                if status != Status::Committed {
                    return Ok(());
                }
                let Some(entries) = entries(value) else {
                    return Err(bad(
                        "value".into(),
                        format!(":init takes a map of keys to values, found {}", value.kind()),
                    ));
                };
                for (k, v) in entries {
                    let key = scalar(k).map_err(|m| bad("value".into(), format!("key: {m}")))?;
                    let obj = self.h.intern_object(self.kv, key);
                    let v = self.value(v).map_err(|m| bad("value".into(), m))?;
                    self.h.initial.retain(|(o, _)| *o != obj);
                    self.h.initial.push((obj, v));
                }
                Ok(())
            }
            "txn" => {
                let Edn::Vector(mops) = value else {
                    return Err(bad(
                        "value".into(),
                        format!("a transaction is a vector of micro-ops, found {}", value.kind()),
                    ));
                };
                let mut ops = Vec::with_capacity(mops.len());
                for (i, mop) in mops.iter().enumerate() {
                    let op = self.micro_op(mop).map_err(|m| bad(format!("value[{i}]"), m))?;
                    match op {
                        Some(op @ (Op::Read { .. } | Op::Select { .. })) if status != Status::Committed => {
                            drop(op);
                            self.unobserved_reads += 1;
                        }
                        Some(op) => ops.push(op),
                        None => {}
                    }
                }
                self.counter += 1;
                let name = name.unwrap_or(Scalar::Int(index.unwrap_or(self.counter)));
                // An operation without a `:process` has no known session: one of its own,
                // so session order (part of every level by default) invents no order.
                let session = session.unwrap_or_else(|| match process {
                    NO_PROCESS => Scalar::Text(format!("no-process-{}", self.counter).into()),
                    p => Scalar::Int(p),
                });
                let session = self.h.intern_session(session);
                let mut t = Transaction::new(name, session, ops);
                t.status = status;
                t.set_real_time(real_time);
                self.h
                    .push_txn(t)
                    .map_err(|t| bad("index".into(), format!("transaction id {} appears twice", t.name)))?;
                Ok(())
            }
            other => Err(bad("f".into(), format!("unsupported operation :{other} (txn, init)"))),
        }
    }

    fn value(&mut self, v: &Edn) -> Result<ValueId, String> {
        Ok(match v {
            Edn::Nil => ValueId::ABSENT,
            Edn::Vector(items) => {
                let items = items.iter().map(scalar).collect::<Result<Vec<_>, _>>()?;
                self.h.intern_value(Value::List(items.into_boxed_slice()))
            }
            other => self.h.intern_value(Value::Scalar(scalar(other)?)),
        })
    }

    fn micro_op(&mut self, mop: &Edn) -> Result<Option<Op>, String> {
        let Edn::Vector(parts) = mop else {
            return Err(format!("a micro-op is a vector, found {}", mop.kind()));
        };
        let f = match parts.first() {
            Some(Edn::Keyword(f) | Edn::Str(f)) => f.as_str(),
            _ => return Err("a micro-op starts with its function (:r, :w, :append, ...)".into()),
        };
        let arg = |i: usize| parts.get(i).ok_or_else(|| format!("[:{f} ...] needs {} arguments", i));
        if !matches!((f, parts.len()), ("delete", 2) | ("r" | "w" | "append" | "insert" | "rp", 3)) {
            return Err(format!("[:{f} ...] has {} elements", parts.len()));
        }
        if f == "rp" {
            return self.predicate_read(arg(1)?, arg(2)?).map(Some);
        }
        let key = scalar(arg(1)?).map_err(|m| format!("key: {m}"))?;
        let obj = self.h.intern_object(self.kv, key);
        Ok(Some(match f {
            "r" => Op::Read { obj, value: self.value(arg(2)?)? },
            "w" | "insert" => {
                if matches!(arg(2)?, Edn::Vector(_)) {
                    return Err("a write installs a scalar (use :append for lists)".into());
                }
                Op::Write { obj, value: self.value(arg(2)?)? }
            }
            "delete" => Op::Write { obj, value: ValueId::ABSENT },
            "append" => {
                let element = scalar(arg(2)?)?;
                if element.is_null() {
                    return Err("cannot append nil".into());
                }
                Op::Append { obj, element }
            }
            other => return Err(format!("unknown micro-op :{other} (r, w, append, insert, delete, rp)")),
        }))
    }

    fn predicate_read(&mut self, pred: &Edn, result: &Edn) -> Result<Op, String> {
        let sql = predicate_sql(pred)?;
        let predicate = self.h.intern_predicate(self.kv, &sql);
        let Some(entries) = entries(result) else {
            return Err(format!(
                "[:rp pred result]: result is a map of keys to values, found {}",
                result.kind()
            ));
        };
        let mut rows = Vec::with_capacity(entries.len());
        for (k, v) in entries {
            let obj = self.h.intern_object(self.kv, scalar(k).map_err(|m| format!("result key: {m}"))?);
            let value = self.value(v)?;
            rows.push(ResultRow { obj, value });
        }
        Ok(Op::Select { predicate, rows: rows.into() })
    }

    /// Finishes: invocations that never completed become unknown transactions. Returns the
    /// history and notes on what was left out.
    pub(crate) fn finish(mut self) -> Result<(History, Vec<String>), FormatError> {
        let mut left: Vec<(i64, Pending)> = self.pending.drain().collect();
        left.sort_by_key(|(_, p)| p.line);
        for (process, p) in left {
            let real_time = p.time.map(|invoked_at| RealTime { invoked_at, completed_at: i64::MAX });
            self.complete(
                p.line,
                process,
                p.index,
                &p.f,
                Status::Unknown,
                &p.value,
                p.name,
                p.session,
                real_time,
            )?;
        }
        let mut notes = Vec::new();
        if self.unobserved_reads > 0 {
            notes.push(format!(
                "{} reads of failed or indeterminate transactions were not observed and are left out",
                self.unobserved_reads
            ));
        }
        if self.unmatched_info > 0 {
            notes.push(format!("{} :info completions with no invocation were left out", self.unmatched_info));
        }
        Ok((self.h, notes))
    }
}

/// The real time of an invocation completed on `line`: `None` unless both carry `:time`. An
/// `:info` completion says nothing of when the transaction took effect, so it stays open
/// (`completed_at` is `i64::MAX`), as Elle treats indeterminate operations.
fn real_time(
    line: usize,
    invoked: Option<i64>,
    completed: Option<i64>,
    status: Status,
) -> Result<Option<RealTime>, FormatError> {
    let Some(invoked_at) = invoked else { return Ok(None) };
    if status == Status::Unknown {
        return Ok(Some(RealTime { invoked_at, completed_at: i64::MAX }));
    }
    let Some(completed_at) = completed else { return Ok(None) };
    if completed_at < invoked_at {
        return Err(FormatError::invalid(
            line,
            "time",
            format!("the completion's :time {completed_at} is before its invocation's {invoked_at}"),
        ));
    }
    Ok(Some(RealTime { invoked_at, completed_at }))
}

/// Moves the value at keyword `key` out of a map (leaving nil), without copying it.
fn take(op: &mut Edn, key: &str) -> Option<Edn> {
    match op {
        Edn::Map(entries) => entries
            .iter_mut()
            .find(|(k, _)| matches!(k, Edn::Keyword(s) if s == key))
            .map(|(_, v)| std::mem::replace(v, Edn::Nil)),
        _ => None,
    }
}

/// The entries of a map, or of a vector of `[key value]` pairs (how isocert writes maps with
/// non-text keys in JSON).
fn entries(v: &Edn) -> Option<Vec<(&Edn, &Edn)>> {
    match v {
        Edn::Map(entries) => Some(entries.iter().map(|(k, v)| (k, v)).collect()),
        Edn::Vector(items) => items
            .iter()
            .map(|pair| match pair {
                Edn::Vector(kv) if kv.len() == 2 => Some((&kv[0], &kv[1])),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// A key or scalar value: keywords and strings are text.
pub(crate) fn scalar(v: &Edn) -> Result<Scalar, String> {
    Ok(match v {
        Edn::Nil => Scalar::Null,
        Edn::Bool(b) => Scalar::Bool(*b),
        Edn::Int(i) => Scalar::Int(*i),
        Edn::Float(f) => Scalar::Float(*f),
        Edn::Str(s) | Edn::Keyword(s) | Edn::Symbol(s) => Scalar::Text(s.as_str().into()),
        other => return Err(format!("expected a scalar, found {}", other.kind())),
    })
}

/// Elle's closed predicates as SQL over the kv table's `value` column.
fn predicate_sql(pred: &Edn) -> Result<String, String> {
    match pred {
        Edn::Keyword(k) | Edn::Str(k) if k == "true" => Ok("true".into()),
        Edn::Bool(true) => Ok("true".into()),
        Edn::Vector(parts) => match parts.as_slice() {
            [Edn::Keyword(f) | Edn::Str(f), Edn::Int(v)] if f == "=" => Ok(format!("value = {v}")),
            [Edn::Keyword(f) | Edn::Str(f), Edn::Int(m), Edn::Int(r)] if f == "mod" && *m != 0 => {
                Ok(format!("value % {m} = {r}"))
            }
            _ => Err("unknown predicate (:true, [:= v], [:mod m r])".into()),
        },
        _ => Err("unknown predicate (:true, [:= v], [:mod m r])".into()),
    }
}

/// The closed predicate a kv predicate's SQL stands for, if it is one isocert writes.
pub(crate) fn sql_to_predicate(sql: &str) -> Option<Edn> {
    let sql = sql.trim();
    if sql.eq_ignore_ascii_case("true") {
        return Some(Edn::Keyword("true".into()));
    }
    if let Some(v) = sql.strip_prefix("value = ").and_then(|v| v.parse::<i64>().ok()) {
        return Some(Edn::Vector(vec![Edn::Keyword("=".into()), Edn::Int(v)]));
    }
    let rest = sql.strip_prefix("value % ")?;
    let (m, r) = rest.split_once(" = ")?;
    Some(Edn::Vector(vec![Edn::Keyword("mod".into()), Edn::Int(m.parse().ok()?), Edn::Int(r.parse().ok()?)]))
}
