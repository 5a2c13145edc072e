//! The one error type of the generator.

/// Why a generation run could not be carried out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GenError {
    /// A knob has a value the generator cannot use.
    #[error("--{knob}: {message}")]
    BadKnob {
        /// The knob, spelled as on the command line.
        knob: &'static str,
        /// What is wrong with its value.
        message: String,
    },
    /// A name (isolation level, injection kind, data model) is not one we know.
    #[error(transparent)]
    UnknownName(#[from] isocert_history::UnknownName),
    /// The generated history offers no place for the requested injection (for example no
    /// committed select returned a row to drop).
    #[error("cannot inject {kind}: {reason}")]
    NoInjectionSite {
        /// The injection kind.
        kind: &'static str,
        /// Why no site was found.
        reason: String,
    },
    /// Writing the history or certificate failed.
    #[error("writing the output: {0}")]
    Io(#[from] std::io::Error),
    /// The history model refused what we built (a bug in the generator).
    #[error(transparent)]
    Format(#[from] isocert_history::FormatError),
}
