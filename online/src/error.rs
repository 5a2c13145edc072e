//! The one error type of online checking.

use isocert_checker::CheckError;
use isocert_history::FormatError;

/// What went wrong while publishing or checking online.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OnlineError {
    /// A `kafka://` target that does not parse.
    #[error("{text}: {message}")]
    BadTarget {
        /// The text given.
        text: String,
        /// What is wrong with it.
        message: String,
    },
    /// The broker refused or failed an operation.
    #[error("Kafka: {context}: {message}")]
    Kafka {
        /// What isocert was doing.
        context: String,
        /// The client's message.
        message: String,
    },
    /// A message on the topic is not what a producer of isocert writes (names where it is).
    #[error("topic {topic} partition {partition} offset {offset}: {message}")]
    BadMessage {
        /// The topic.
        topic: String,
        /// The partition.
        partition: u32,
        /// The message's offset.
        offset: i64,
        /// What is wrong.
        message: String,
    },
    /// A transaction online checking cannot take (predicate operations).
    #[error("{what}")]
    Unsupported {
        /// What it is.
        what: String,
    },
    /// The history to publish could not be read.
    #[error(transparent)]
    History(#[from] FormatError),
    /// The checker refused a transaction or the level.
    #[error(transparent)]
    Check(#[from] CheckError),
}

impl OnlineError {
    pub(crate) fn kafka(context: impl Into<String>, e: impl std::fmt::Display) -> OnlineError {
        OnlineError::Kafka { context: context.into(), message: e.to_string() }
    }
}
