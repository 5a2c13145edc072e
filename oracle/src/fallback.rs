//! The interpreter with the database oracle behind it, for predicates it cannot compile.

use isocert_history::{History, ObjId, PredId, ValueId};

use crate::{Bounds, Interpreter, MatchesOracle, OracleError, PostgresOracle};

/// Answers with the [`Interpreter`] where it compiled the predicate and with the
/// [`PostgresOracle`] where it did not (an opt-in: the default is to refuse histories whose
/// predicates the interpreter does not support).
#[derive(Debug)]
pub struct FallbackOracle {
    interpreter: Interpreter,
    database: PostgresOracle,
    fallbacks: Vec<OracleError>,
}

impl FallbackOracle {
    /// Compiles what the interpreter can; the rest goes to `database`.
    pub fn new(h: &History, database: PostgresOracle) -> Self {
        let (interpreter, fallbacks) = Interpreter::new_lenient(h);
        FallbackOracle { interpreter, database, fallbacks }
    }

    /// Why each predicate that goes to the database was not compiled.
    pub fn fallbacks(&self) -> &[OracleError] {
        &self.fallbacks
    }
}

impl MatchesOracle for FallbackOracle {
    fn matches(&self, h: &History, pred: PredId, obj: ObjId, value: ValueId) -> Result<bool, OracleError> {
        if self.interpreter.is_compiled(pred) {
            self.interpreter.matches(h, pred, obj, value)
        } else {
            self.database.matches(h, pred, obj, value)
        }
    }

    fn bounds(&self, pred: PredId) -> Bounds {
        self.interpreter.bounds(pred)
    }
}
