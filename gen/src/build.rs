//! The in-memory sink: records become an interned [`History`] and a [`Certificate`].

use isocert_history::{
    Assign, Certificate, ColId, History, ObjId, Op, OpRef, ResultRow, Scalar, SeenVersion, SessionId,
    SnapshotSet, Status, TableId, Timestamp, Transaction, TxnId, Value, ValueId, Writer, KV_TABLE,
};
use rustc_hash::FxHashMap;

use crate::cert::CertBuilder;
use crate::record::{
    OpRec, Outcome, PredSpec, RowVal, Seen, SeenWriter, Sink, TxnRecord, Val, SQL_COLUMNS, SQL_TABLE,
};
use crate::sim::{GenStats, Sim};
use crate::{DataModel, GenConfig, GenError};

/// A generated history with its certificate.
#[derive(Clone, Debug)]
pub struct Generated {
    /// The history: every transaction with `start_ts`; committed ones with `commit_ts`.
    pub history: History,
    /// Version order, version sets of every committed predicate operation, and the
    /// serialization order (commit-timestamp order).
    pub certificate: Certificate,
    /// What the run produced.
    pub stats: GenStats,
}

/// Generates a history and its certificate in memory (see [`write_stream`](crate::write_stream)
/// for histories too large to hold).
///
/// # Errors
/// [`GenError::BadKnob`] for unusable knobs, [`GenError::NoInjectionSite`] when the
/// injection finds no place in this history.
pub fn generate(cfg: &GenConfig) -> Result<Generated, GenError> {
    cfg.validate()?;
    let mut sim = Sim::new(cfg, true);
    let mut builder = HistoryBuilder::default();
    sim.run(&mut builder)?;
    let cert = sim.cert.take().expect("in-memory runs keep the certificate");
    let certificate = builder.certificate(&cert);
    Ok(Generated { history: builder.h, certificate, stats: sim.stats })
}

#[derive(Debug, Default)]
struct HistoryBuilder {
    h: History,
    table: Option<TableId>,
    columns: Vec<ColId>,
    objects: Vec<Option<ObjId>>,
    sessions: Vec<Option<SessionId>>,
    predicates: FxHashMap<PredSpec, isocert_history::PredId>,
}

impl HistoryBuilder {
    fn table(&self) -> TableId {
        self.table.expect("initial() runs first")
    }

    fn obj(&mut self, obj: u32) -> ObjId {
        let i = obj as usize;
        if i >= self.objects.len() {
            self.objects.resize(i + 1, None);
        }
        if let Some(id) = self.objects[i] {
            return id;
        }
        let id = self.h.intern_object(self.table(), Scalar::Int(i64::from(obj)));
        self.objects[i] = Some(id);
        id
    }

    fn session(&mut self, s: u32) -> SessionId {
        let i = s as usize;
        if i >= self.sessions.len() {
            self.sessions.resize(i + 1, None);
        }
        *self.sessions[i].get_or_insert_with(|| self.h.intern_session(Scalar::Int(i64::from(s))))
    }

    fn row(&mut self, key: u32, r: RowVal) -> ValueId {
        let c = &self.columns;
        let cols = [
            (c[0], Scalar::Int(i64::from(key))),
            (c[1], Scalar::Int(r.c0)),
            (c[2], Scalar::Int(r.c1)),
            (c[3], Scalar::Int(r.c2)),
        ];
        self.h.intern_row(&cols)
    }

    fn value(&mut self, key: u32, val: Val) -> ValueId {
        match val {
            Val::Absent => ValueId::ABSENT,
            Val::Int(i) => self.h.intern_value(Value::Scalar(Scalar::Int(i))),
            Val::Row(r) => self.row(key, r),
            Val::List(_) => unreachable!("list values are read through ReadList"),
        }
    }

    fn predicate(&mut self, pred: PredSpec) -> isocert_history::PredId {
        let table = self.table();
        *self.predicates.entry(pred).or_insert_with(|| self.h.intern_predicate(table, &pred.sql()))
    }

    fn rows(&mut self, rows: &[(u32, RowVal)]) -> Vec<ResultRow> {
        rows.iter().map(|&(o, r)| ResultRow { obj: self.obj(o), value: self.row(o, r) }).collect()
    }

    fn op(&mut self, op: &OpRec) -> Op {
        match op {
            &OpRec::Read { obj, val } => Op::Read { obj: self.obj(obj), value: self.value(obj, val) },
            OpRec::ReadList { obj, elems } => {
                let list = Value::List(elems.iter().map(|&e| Scalar::Int(e)).collect());
                Op::Read { obj: self.obj(*obj), value: self.h.intern_value(list) }
            }
            &OpRec::Write { obj, val } => Op::Write { obj: self.obj(obj), value: self.value(obj, val) },
            &OpRec::Append { obj, elem } => Op::Append { obj: self.obj(obj), element: Scalar::Int(elem) },
            OpRec::Select { pred, rows, .. } => {
                Op::Select { predicate: self.predicate(*pred), rows: self.rows(rows).into() }
            }
            OpRec::Update { pred, set_c1, rows, .. } => Op::Update {
                predicate: self.predicate(*pred),
                set: vec![(self.columns[2], Assign::Const(Scalar::Int(*set_c1)))].into(),
                rows: self.rows(rows).into(),
            },
            OpRec::Delete { pred, rows, .. } => Op::Delete {
                predicate: self.predicate(*pred),
                rows: rows.iter().map(|&o| ResultRow { obj: self.obj(o), value: ValueId::ABSENT }).collect(),
            },
        }
    }

    fn certificate(&mut self, cert: &CertBuilder) -> Certificate {
        let txn = |id: u32| TxnId::from_index(id as usize);
        let mut version_order = FxHashMap::default();
        for (obj, writers) in cert.version_order.iter().enumerate() {
            if !writers.is_empty() {
                version_order.insert(self.obj(obj as u32), writers.iter().map(|&w| txn(w)).collect());
            }
        }
        let mut version_sets = FxHashMap::default();
        let mut snapshot_sets = FxHashMap::default();
        for rec in &cert.version_sets {
            let (id, op, seen) = (&rec.txn, &rec.op, &rec.seen);
            if !cert.explicit {
                let snap = SnapshotSet {
                    visible_through: Timestamp::new(rec.at),
                    except: Vec::new(),
                    unseen: Vec::new(),
                };
                snapshot_sets.insert(OpRef { txn: txn(*id), op: *op }, snap);
                continue;
            }
            let versions = seen
                .iter()
                .map(|&Seen { obj, writer }| SeenVersion {
                    obj: self.obj(obj),
                    writer: match writer {
                        SeenWriter::Initial => Writer::Initial,
                        SeenWriter::Txn(w) => Writer::Txn(txn(w)),
                        SeenWriter::Own => Writer::Txn(txn(*id)),
                    },
                })
                .collect();
            version_sets.insert(OpRef { txn: txn(*id), op: *op }, versions);
        }
        Certificate {
            version_order: Some(version_order),
            version_sets: Some(version_sets),
            snapshot_sets: (!cert.explicit).then_some(snapshot_sets),
            serialization_order: Some(cert.serialization_order().into_iter().map(txn).collect()),
            writer_identity: false,
            hidden_reads: Vec::new(),
        }
    }
}

impl Sink for HistoryBuilder {
    fn initial(&mut self, model: DataModel, initial: &[(u32, Val)]) -> Result<(), GenError> {
        self.h = History::new();
        let name = if model == DataModel::SqlTable { SQL_TABLE } else { KV_TABLE };
        let table = self.h.intern_table(name);
        self.table = Some(table);
        if model == DataModel::SqlTable {
            self.columns = SQL_COLUMNS.iter().map(|c| self.h.intern_column(table, c)).collect();
        }
        for &(obj, val) in initial {
            let o = self.obj(obj);
            let v = self.value(obj, val);
            self.h.initial.push((o, v));
        }
        Ok(())
    }

    fn txn(&mut self, rec: &TxnRecord) -> Result<(), GenError> {
        let ops = rec.ops.iter().map(|op| self.op(op)).collect();
        let mut t = Transaction::new(Scalar::Int(i64::from(rec.id)), self.session(rec.session), ops);
        t.status = match rec.outcome {
            Outcome::Committed => Status::Committed,
            Outcome::Aborted => Status::Aborted,
        };
        t.set_start_ts(Some(Timestamp::new(rec.start_ts)));
        t.set_commit_ts(rec.commit_ts.map(Timestamp::new));
        let id = self.h.push_txn(t).map_err(|t| GenError::BadKnob {
            knob: "txns",
            message: format!("generator bug: transaction id {} repeated", t.name),
        })?;
        debug_assert_eq!(id.index(), rec.id as usize);
        Ok(())
    }
}
