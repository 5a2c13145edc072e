//! The streaming sink: v1 JSON lines written as transactions finish, without a [`History`]
//! in memory, so a million transactions take seconds and little memory.
//!
//! The output is what [`isocert_history::v1::write_history`] would write for the same
//! history (same fields in the same order), written by hand into a reused buffer.
//!
//! [`History`]: isocert_history::History

use std::io::Write;

use crate::cert::{CertBuilder, VersionSetRec};
use crate::record::{OpRec, Outcome, RowVal, SeenWriter, Sink, TxnRecord, Val, SQL_TABLE};
use crate::sim::{GenStats, Sim};
use crate::{DataModel, GenConfig, GenError};

/// Generates straight into `history` (JSON lines), and the certificate into `certificate`
/// when given; only the certificate's compact form (writer ids per object, version sets)
/// is held in memory until the end.
///
/// # Errors
/// [`GenError::BadKnob`] for unusable knobs, [`GenError::NoInjectionSite`] when the
/// injection finds no place, [`GenError::Io`] when writing fails.
pub fn write_stream<W: Write>(
    cfg: &GenConfig,
    history: W,
    certificate: Option<&mut dyn Write>,
) -> Result<GenStats, GenError> {
    cfg.validate()?;
    if cfg.inject == Some(crate::Injection::CertificateContradiction) && certificate.is_none() {
        return Err(GenError::BadKnob {
            knob: "inject",
            message: "certificate-contradiction edits the certificate; ask for one (--certificate)".into(),
        });
    }
    let mut sim = Sim::new(cfg, certificate.is_some());
    let mut sink = JsonlSink { out: history, buf: Vec::with_capacity(1 << 16), kv: true };
    sim.run(&mut sink)?;
    sink.flush()?;
    if let (Some(out), Some(cert)) = (certificate, sim.cert.take()) {
        write_certificate(&cert, !sink.kv, out)?;
    }
    Ok(sim.stats)
}

/// Flush the buffer to the writer once it holds this many bytes.
const FLUSH_AT: usize = 1 << 16;

struct JsonlSink<W> {
    out: W,
    buf: Vec<u8>,
    kv: bool,
}

impl<W: Write> JsonlSink<W> {
    fn flush(&mut self) -> Result<(), GenError> {
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        self.out.flush()?;
        Ok(())
    }

    fn key_fields(&mut self, obj: u32) {
        if !self.kv {
            self.buf.extend_from_slice(b"\"table\":\"t\",");
        }
        self.buf.extend_from_slice(b"\"key\":");
        push_int(&mut self.buf, i64::from(obj));
    }

    fn value(&mut self, obj: u32, val: Val) {
        match val {
            Val::Absent => self.buf.extend_from_slice(b"null"),
            Val::Int(i) => push_int(&mut self.buf, i),
            Val::Row(r) => push_row(&mut self.buf, obj, r),
            Val::List(_) => unreachable!("list values are read through ReadList"),
        }
    }

    fn item(&mut self, f: &[u8], obj: u32) {
        self.buf.extend_from_slice(b"{\"f\":\"");
        self.buf.extend_from_slice(f);
        self.buf.extend_from_slice(b"\",");
        self.key_fields(obj);
        self.buf.extend_from_slice(b",\"value\":");
    }

    fn predicate_head(&mut self, f: &[u8], pred: crate::record::PredSpec) {
        self.buf.extend_from_slice(b"{\"f\":\"");
        self.buf.extend_from_slice(f);
        self.buf.extend_from_slice(b"\",\"table\":\"t\",\"where\":\"");
        let mut sql = String::new();
        pred.render(&mut sql);
        self.buf.extend_from_slice(sql.as_bytes());
        self.buf.push(b'"');
    }

    fn rows(&mut self, rows: &[(u32, RowVal)]) {
        self.buf.extend_from_slice(b",\"rows\":[");
        for (i, &(o, r)) in rows.iter().enumerate() {
            if i > 0 {
                self.buf.push(b',');
            }
            self.buf.extend_from_slice(b"{\"key\":");
            push_int(&mut self.buf, i64::from(o));
            self.buf.extend_from_slice(b",\"value\":");
            push_row(&mut self.buf, o, r);
            self.buf.push(b'}');
        }
        self.buf.extend_from_slice(b"]}");
    }

    fn op(&mut self, op: &OpRec) {
        match op {
            &OpRec::Read { obj, val } => {
                self.item(b"r", obj);
                self.value(obj, val);
                self.buf.push(b'}');
            }
            OpRec::ReadList { obj, elems } => {
                self.item(b"r", *obj);
                self.buf.push(b'[');
                for (i, &e) in elems.iter().enumerate() {
                    if i > 0 {
                        self.buf.push(b',');
                    }
                    push_int(&mut self.buf, e);
                }
                self.buf.extend_from_slice(b"]}");
            }
            &OpRec::Write { obj, val } => {
                self.item(b"w", obj);
                self.value(obj, val);
                self.buf.push(b'}');
            }
            &OpRec::Append { obj, elem } => {
                self.item(b"append", obj);
                push_int(&mut self.buf, elem);
                self.buf.push(b'}');
            }
            OpRec::Select { pred, rows, .. } => {
                self.predicate_head(b"select", *pred);
                self.rows(rows);
            }
            OpRec::Update { pred, set_c1, rows, .. } => {
                self.predicate_head(b"update", *pred);
                self.buf.extend_from_slice(b",\"set\":{\"c1\":");
                push_int(&mut self.buf, *set_c1);
                self.buf.push(b'}');
                self.rows(rows);
            }
            OpRec::Delete { pred, rows, .. } => {
                self.predicate_head(b"delete", *pred);
                self.buf.extend_from_slice(b",\"rows\":[");
                for (i, &o) in rows.iter().enumerate() {
                    if i > 0 {
                        self.buf.push(b',');
                    }
                    self.buf.extend_from_slice(b"{\"key\":");
                    push_int(&mut self.buf, i64::from(o));
                    self.buf.push(b'}');
                }
                self.buf.extend_from_slice(b"]}");
            }
        }
    }
}

impl<W: Write> Sink for JsonlSink<W> {
    fn initial(&mut self, model: DataModel, initial: &[(u32, Val)]) -> Result<(), GenError> {
        self.kv = model != DataModel::SqlTable;
        if initial.is_empty() {
            return Ok(());
        }
        self.buf.extend_from_slice(b"{\"format\":\"isocert-history\",\"version\":1,\"initial\":[");
        for (i, &(obj, val)) in initial.iter().enumerate() {
            if i > 0 {
                self.buf.push(b',');
            }
            self.buf.push(b'{');
            self.key_fields(obj);
            self.buf.extend_from_slice(b",\"value\":");
            self.value(obj, val);
            self.buf.push(b'}');
        }
        self.buf.extend_from_slice(b"]}\n");
        Ok(())
    }

    fn txn(&mut self, rec: &TxnRecord) -> Result<(), GenError> {
        self.buf.extend_from_slice(b"{\"id\":");
        push_int(&mut self.buf, i64::from(rec.id));
        self.buf.extend_from_slice(b",\"session\":");
        push_int(&mut self.buf, i64::from(rec.session));
        if rec.outcome == Outcome::Aborted {
            self.buf.extend_from_slice(b",\"status\":\"aborted\"");
        }
        self.buf.extend_from_slice(b",\"start_ts\":");
        push_uint(&mut self.buf, rec.start_ts);
        if let Some(ts) = rec.commit_ts {
            self.buf.extend_from_slice(b",\"commit_ts\":");
            push_uint(&mut self.buf, ts);
        }
        self.buf.extend_from_slice(b",\"ops\":[");
        for (i, op) in rec.ops.iter().enumerate() {
            if i > 0 {
                self.buf.push(b',');
            }
            self.op(op);
        }
        self.buf.extend_from_slice(b"]}\n");
        if self.buf.len() >= FLUSH_AT {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }
}

/// Writes the certificate as one v1 JSON document.
fn write_certificate(cert: &CertBuilder, sql: bool, out: &mut dyn Write) -> Result<(), GenError> {
    let mut buf = Vec::with_capacity(1 << 16);
    let key = |buf: &mut Vec<u8>, obj: u32| {
        if sql {
            buf.extend_from_slice(b"\"table\":\"");
            buf.extend_from_slice(SQL_TABLE.as_bytes());
            buf.extend_from_slice(b"\",");
        }
        buf.extend_from_slice(b"\"key\":");
        push_int(buf, i64::from(obj));
    };
    let mut spill = |buf: &mut Vec<u8>| -> std::io::Result<()> {
        if buf.len() >= FLUSH_AT {
            out.write_all(buf)?;
            buf.clear();
        }
        Ok(())
    };
    buf.extend_from_slice(b"{\"format\":\"isocert-certificate\",\"version\":1,\"version_order\":[");
    let mut first = true;
    for (obj, writers) in cert.version_order.iter().enumerate().filter(|(_, w)| !w.is_empty()) {
        if !std::mem::take(&mut first) {
            buf.push(b',');
        }
        buf.push(b'{');
        key(&mut buf, obj as u32);
        buf.extend_from_slice(b",\"writers\":");
        push_ids(&mut buf, writers.iter().copied());
        buf.push(b'}');
        spill(&mut buf)?;
    }
    buf.extend_from_slice(b"],\"version_sets\":[");
    let mut sets: Vec<&VersionSetRec> = cert.version_sets.iter().collect();
    sets.sort_by_key(|r| (r.txn, r.op));
    for (i, rec) in sets.into_iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        buf.extend_from_slice(b"{\"txn\":");
        push_int(&mut buf, i64::from(rec.txn));
        buf.extend_from_slice(b",\"op\":");
        push_int(&mut buf, i64::from(rec.op));
        if !cert.explicit {
            buf.extend_from_slice(b",\"snapshot\":{\"visible_through\":");
            push_uint(&mut buf, rec.at);
            buf.extend_from_slice(b"}}");
            spill(&mut buf)?;
            continue;
        }
        buf.extend_from_slice(b",\"versions\":[");
        for (j, s) in rec.seen.iter().enumerate() {
            if j > 0 {
                buf.push(b',');
            }
            buf.push(b'{');
            key(&mut buf, s.obj);
            buf.extend_from_slice(b",\"writer\":");
            match s.writer {
                SeenWriter::Initial => buf.extend_from_slice(b"null"),
                SeenWriter::Txn(w) => push_int(&mut buf, i64::from(w)),
                SeenWriter::Own => push_int(&mut buf, i64::from(rec.txn)),
            }
            buf.push(b'}');
        }
        buf.extend_from_slice(b"]}");
        spill(&mut buf)?;
    }
    buf.extend_from_slice(b"],\"serialization_order\":");
    push_ids(&mut buf, cert.serialization_order().into_iter());
    buf.extend_from_slice(b"}\n");
    out.write_all(&buf)?;
    out.flush()?;
    Ok(())
}

fn push_ids(buf: &mut Vec<u8>, ids: impl Iterator<Item = u32>) {
    buf.push(b'[');
    for (i, id) in ids.enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        push_int(buf, i64::from(id));
    }
    buf.push(b']');
}

fn push_row(buf: &mut Vec<u8>, key: u32, r: RowVal) {
    buf.extend_from_slice(b"{\"id\":");
    push_int(buf, i64::from(key));
    buf.extend_from_slice(b",\"c0\":");
    push_int(buf, r.c0);
    buf.extend_from_slice(b",\"c1\":");
    push_int(buf, r.c1);
    buf.extend_from_slice(b",\"c2\":");
    push_int(buf, r.c2);
    buf.push(b'}');
}

/// Two-digit decimal pairs "00".."99", for [`push_uint`].
const DIGIT_PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Appends the decimal digits of `v`, two at a time (no allocation, no formatting machinery).
fn push_uint(buf: &mut Vec<u8>, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    while v >= 100 {
        let pair = (v % 100) as usize * 2;
        v /= 100;
        i -= 2;
        digits[i..i + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if v >= 10 {
        let pair = v as usize * 2;
        i -= 2;
        digits[i..i + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        i -= 1;
        digits[i] = b'0' + v as u8;
    }
    buf.extend_from_slice(&digits[i..]);
}

fn push_int(buf: &mut Vec<u8>, v: i64) {
    if v < 0 {
        buf.push(b'-');
    }
    push_uint(buf, v.unsigned_abs());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_print_like_std() {
        for v in [0i64, 7, -7, 10, 99, 100, 101, 1_234_567, 12_345_678, i64::MAX, i64::MIN, -1] {
            let mut buf = Vec::new();
            push_int(&mut buf, v);
            assert_eq!(String::from_utf8(buf).unwrap(), v.to_string());
        }
    }
}
