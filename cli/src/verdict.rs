//! The verdict of one scenario permutation and the summary line of a run (`isocert
//! scenario`): which verdicts decide a permutation, and the exit code they give.

use std::process::ExitCode;

use serde_json::json;

use crate::exit;

/// How a permutation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Checked with every statement recorded: no anomaly.
    Valid,
    /// Checked: anomalies.
    Anomalies,
    /// No anomaly in what was recorded, but some statements ran unrecorded: undecided.
    Partial,
    /// No certificate could be complete (a write the history lacks): undecided.
    Uncertified,
    /// A step waited for a lock only a later step releases: the schedule did not run.
    Invalid,
    /// No recordable table: nothing to check, undecided.
    Unrecorded,
}

impl Verdict {
    /// The word in lines, JSON and tables.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verdict::Valid => "valid",
            Verdict::Anomalies => "anomalies",
            Verdict::Partial => "partial",
            Verdict::Uncertified => "uncertified",
            Verdict::Invalid => "invalid",
            Verdict::Unrecorded => "unrecorded",
        }
    }
}

/// The counts of the summary line.
#[derive(Debug, Default)]
pub(crate) struct Summary {
    pub(crate) permutations: usize,
    pub(crate) valid: usize,
    pub(crate) anomalous: usize,
    pub(crate) uncertified: usize,
    pub(crate) partial: usize,
    pub(crate) unrecorded: usize,
    pub(crate) invalid: usize,
}

impl Summary {
    pub(crate) fn of(verdicts: impl IntoIterator<Item = Verdict>) -> Summary {
        let mut s = Summary::default();
        for verdict in verdicts {
            s.permutations += 1;
            match verdict {
                Verdict::Valid => s.valid += 1,
                Verdict::Anomalies => s.anomalous += 1,
                Verdict::Partial => s.partial += 1,
                Verdict::Uncertified => s.uncertified += 1,
                Verdict::Unrecorded => s.unrecorded += 1,
                Verdict::Invalid => s.invalid += 1,
            }
        }
        s
    }

    /// The counts as JSON (`summary` in `--json`).
    pub(crate) fn to_json(&self) -> serde_json::Value {
        json!({
            "permutations": self.permutations,
            "valid": self.valid,
            "anomalous": self.anomalous,
            "uncertified": self.undecided(),
            "of_which_partial": self.partial,
            "of_which_unrecorded": self.unrecorded,
            "invalid": self.invalid,
        })
    }

    /// Permutations that ran and were not decided.
    pub(crate) fn undecided(&self) -> usize {
        self.partial + self.uncertified + self.unrecorded
    }

    /// `12 permutation(s): 8 valid, 2 anomalous, 1 uncertified (of which 1 partial, 0
    /// unrecorded), 1 invalid`: uncertified counts every permutation that ran undecided.
    pub(crate) fn line(&self) -> String {
        format!(
            "{} permutation(s): {} valid, {} anomalous, {} uncertified (of which {} partial, {} unrecorded), {} \
             invalid",
            self.permutations,
            self.valid,
            self.anomalous,
            self.undecided(),
            self.partial,
            self.unrecorded,
            self.invalid
        )
    }

    /// The exit code: 2 when a permutation was left undecided (unless allowed) or none was
    /// decided, else 1 when one showed anomalies, else 0.
    pub(crate) fn exit(&self, allow_uncertified: bool) -> ExitCode {
        let decided = self.valid + self.anomalous;
        if !allow_uncertified && (self.undecided() > 0 || decided == 0) {
            exit::error()
        } else if self.anomalous > 0 {
            exit::anomalies()
        } else {
            exit::valid()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(verdicts: &[Verdict], allow: bool) -> ExitCode {
        Summary::of(verdicts.iter().copied()).exit(allow)
    }

    /// Issue 29: an undecided permutation is never exit 0; --allow-uncertified accepts it.
    #[test]
    fn undecided_permutations_fail_the_run_unless_allowed() {
        use Verdict::*;
        assert_eq!(code(&[Valid, Invalid], false), exit::valid());
        assert_eq!(code(&[Valid, Anomalies], false), exit::anomalies());
        for undecided in [Partial, Uncertified, Unrecorded] {
            assert_eq!(code(&[Valid, undecided], false), exit::error(), "{undecided:?}");
            assert_eq!(code(&[Anomalies, undecided], false), exit::error(), "{undecided:?}");
            assert_eq!(code(&[Valid, undecided], true), exit::valid(), "{undecided:?}");
            assert_eq!(code(&[Anomalies, undecided], true), exit::anomalies(), "{undecided:?}");
        }
        // Nothing decided decides nothing.
        assert_eq!(code(&[Invalid], false), exit::error());
        assert_eq!(code(&[], false), exit::error());
        let s = Summary::of([Valid, Anomalies, Partial, Uncertified, Unrecorded, Invalid]);
        assert_eq!(
            s.line(),
            "6 permutation(s): 1 valid, 1 anomalous, 3 uncertified (of which 1 partial, 1 unrecorded), 1 invalid"
        );
    }
}
