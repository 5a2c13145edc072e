//! What an isolation level allows, in the words users know (Adya's classes, Hermitage's
//! names), for the note `run`, `hunt` and the HTML report give when a history is checked
//! at a level that permits anomalies someone may be looking for: a VALID verdict at read
//! committed says nothing about lost updates, and the reader should be told so.

use isocert_checker::IsolationLevel;

/// The well-known anomalies `level` allows, or `None` at serializable and above (whose
/// only further promise, real-time order, `strict-serializable` checks).
pub(crate) fn allowed_at(level: IsolationLevel) -> Option<&'static str> {
    Some(match level {
        IsolationLevel::ReadUncommitted => {
            "dirty reads (G1a, G1b), circular information flow (G1c), lost updates (P4), read skew \
             (G-single), write skew (G2-item) and phantoms (G2)"
        }
        IsolationLevel::ReadCommitted => {
            "lost updates (P4) across statements, read skew (G-single), write skew (G2-item) and \
             phantoms (G2); a lost update inside one statement is still reported where the database \
             documents that a write is computed from the newest version (its statement-level promises)"
        }
        IsolationLevel::ReadAtomic => {
            "causality violations, lost updates (P4), write skew (G2-item) and phantoms (G2)"
        }
        IsolationLevel::Causal => "lost updates (P4), write skew (G2-item) and phantoms (G2)",
        IsolationLevel::RepeatableRead => "phantoms (G2: cycles through predicate reads)",
        IsolationLevel::SnapshotIsolation => "write skew (G2-item) and its predicate form (G2)",
        IsolationLevel::Serializable | IsolationLevel::StrictSerializable => return None,
    })
}

/// The note for a history checked at `level`: what the level allows, that such anomalies
/// are not reported, and how to ask for them (`--check serializable`); `None` at
/// serializable and above.
pub(crate) fn allowed_note(level: IsolationLevel) -> Option<String> {
    allowed_at(level).map(|allowed| {
        format!(
            "{level} allows {allowed}: those are not anomalies at the level checked and are not reported; \
             to look for them, check at a stronger level (--check serializable)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_below_serializable_say_what_they_allow_and_how_to_ask_for_more() {
        let rc = allowed_note(IsolationLevel::ReadCommitted).unwrap();
        assert!(rc.starts_with("read-committed allows lost updates (P4)"), "{rc}");
        assert!(rc.contains("--check serializable"), "{rc}");
        for level in IsolationLevel::ALL {
            let strong = level >= IsolationLevel::Serializable;
            assert_eq!(allowed_note(level).is_none(), strong, "{level}");
        }
    }
}
