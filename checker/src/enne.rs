//! enne: being written.

use isocert_history::{Certificate, History};
use isocert_oracle::MatchesOracle;

use crate::{CheckError, CheckerKind, IsolationLevel, Report};

pub(crate) fn check(
    _h: &History,
    _cert: &Certificate,
    _level: IsolationLevel,
    _oracle: &dyn MatchesOracle,
) -> Result<Report, CheckError> {
    Err(CheckError::UnsupportedHistory {
        checker: CheckerKind::Emme,
        what: "not implemented yet".to_string(),
    })
}
