//! What Chronos and Aion may conclude at serializability from a history whose timestamps
//! do not promise to be its serialization order (the header's `serial_order: "unknown"`).
//!
//! Both check serializability by running each transaction atomically at its commit
//! timestamp. A valid verdict is then a proof: the commit order is a serial order that
//! explains every read. A violation only proves that the commit order is not one, which is
//! an anomaly where the database serializes in commit order and no fact where it does not
//! (PostgreSQL's SSI serializes a transaction before one that committed earlier). So on
//! such a history the checks of commit order (`ext`, `no-conflict`, `session`) are
//! uncertified, while `int` (a read disagreeing with its own transaction) stays an anomaly
//! whatever the order.

use isocert_history::SerialOrder;

use crate::{AnomalyKind, CheckError, IsolationLevel, Report};

/// Whether a violation of commit-timestamp order is an anomaly at `level` for a history
/// whose timestamps say `order`: always below serializability (snapshot isolation is
/// defined by the timestamps), at serializability only when they are the serial order.
pub fn commit_order_decides(level: IsolationLevel, order: SerialOrder) -> bool {
    level != IsolationLevel::Serializable || order == SerialOrder::CommitTs
}

/// The findings of a commit-order violation shown in [`CheckError::SerialOrderUnknown`].
const SHOWN: usize = 3;

/// Settles a Chronos or Aion report on a history whose timestamps say `order`.
///
/// Where [`commit_order_decides`], the report is the verdict. Otherwise a valid report
/// stays valid; `int` anomalies stay anomalies (the findings that only break commit order
/// are left out, with a note saying how many); a report of commit-order findings alone is
/// uncertified.
///
/// # Errors
/// [`CheckError::SerialOrderUnknown`] naming the first findings, when nothing but the
/// commit order was found broken.
pub fn settle_serial_order(mut report: Report, order: SerialOrder) -> Result<Report, CheckError> {
    if commit_order_decides(report.level, order) || report.anomalies.is_empty() {
        return Ok(report);
    }
    let (facts, of_order): (Vec<_>, Vec<_>) =
        std::mem::take(&mut report.anomalies).into_iter().partition(|a| a.kind == AnomalyKind::Int);
    if facts.is_empty() {
        let mut shown: Vec<String> = of_order.iter().take(SHOWN).map(|a| a.explanation.clone()).collect();
        if of_order.len() > SHOWN {
            shown.push(format!("and {} more", of_order.len() - SHOWN));
        }
        return Err(CheckError::SerialOrderUnknown { found: of_order.len(), findings: shown.join("; ") });
    }
    report.anomalies = facts;
    report.notes.push(format!(
        "{} further finding(s) only say the history is not serializable in commit-timestamp order, which its \
         timestamps do not promise (serial_order \"unknown\"); they are not reported as anomalies",
        of_order.len()
    ));
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Anomaly, CheckerKind};

    fn report(level: IsolationLevel, kinds: &[AnomalyKind]) -> Report {
        let mut r = Report::new(level, CheckerKind::Chronos);
        r.anomalies = kinds
            .iter()
            .map(|&kind| Anomaly {
                kind,
                txns: Vec::new(),
                ops: Vec::new(),
                objects: Vec::new(),
                explanation: format!("{kind} found"),
                cycle: Vec::new(),
            })
            .collect();
        r
    }

    const SER: IsolationLevel = IsolationLevel::Serializable;

    #[test]
    fn commit_order_findings_are_anomalies_where_the_timestamps_are_the_serial_order() {
        let r = settle_serial_order(report(SER, &[AnomalyKind::Ext]), SerialOrder::CommitTs).unwrap();
        assert_eq!(r.anomalies.len(), 1);
        let si = IsolationLevel::SnapshotIsolation;
        let r = settle_serial_order(report(si, &[AnomalyKind::Ext]), SerialOrder::Unknown).unwrap();
        assert_eq!(r.anomalies.len(), 1, "snapshot isolation is defined by the timestamps");
    }

    #[test]
    fn commit_order_findings_alone_are_uncertified_where_the_order_is_unknown() {
        let kinds = [AnomalyKind::Ext, AnomalyKind::Session, AnomalyKind::NoConflict, AnomalyKind::Ext];
        let e = settle_serial_order(report(SER, &kinds), SerialOrder::Unknown).unwrap_err();
        let CheckError::SerialOrderUnknown { found, findings } = &e else { panic!("{e}") };
        assert_eq!(*found, 4);
        assert!(findings.ends_with("and 1 more"), "{findings}");
        assert!(e.to_string().contains("uncertified"), "{e}");
    }

    #[test]
    fn int_anomalies_stay_anomalies_and_a_valid_report_stays_valid_whatever_the_order() {
        let r = settle_serial_order(report(SER, &[AnomalyKind::Ext, AnomalyKind::Int]), SerialOrder::Unknown)
            .unwrap();
        assert_eq!(r.anomalies.iter().map(|a| a.kind).collect::<Vec<_>>(), [AnomalyKind::Int]);
        assert!(r.notes.iter().any(|n| n.starts_with("1 further finding(s)")), "{:?}", r.notes);
        assert!(settle_serial_order(report(SER, &[]), SerialOrder::Unknown).unwrap().is_valid());
    }
}
