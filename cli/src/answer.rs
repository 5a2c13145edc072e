//! A time limit on every exchange with a user's database outside the workload itself: a
//! `mysql://` URL pointed at a PostgreSQL port waits forever for the greeting MySQL servers
//! send first, and a server that accepts connections and never answers (a stopped process
//! behind a listening socket, a proxy with no backend) hung `isocert run` until it was
//! killed. Connecting, the clean-up of earlier runs, the table check, the table's creation,
//! the start of the change capture and the final drop each get `--answer-timeout-secs` and
//! fail with a message naming the step and the (redacted) URL, exit 2.

use std::future::Future;
use std::time::Duration;

/// The default time limit, in seconds: generous for a loaded server, short enough that a
/// wrong port is reported while the user is still watching.
pub(crate) const DEFAULT_SECS: u64 = 30;

/// Runs `step` (named `what`) against the database at `url` within `limit`.
///
/// # Errors
/// The step's error with `what` as context, or a time-out naming the step, the URL with its
/// password redacted and the likely causes.
pub(crate) async fn within<T, E>(
    limit: Duration,
    what: &str,
    url: &str,
    step: impl Future<Output = Result<T, E>>,
) -> anyhow::Result<T>
where
    E: std::error::Error + Send + Sync + 'static,
{
    match tokio::time::timeout(limit, step).await {
        Ok(result) => Ok(result.map_err(|e| anyhow::Error::new(e).context(what.to_string()))?),
        Err(_) => anyhow::bail!(
            "{what}: {} gave no answer within {}s (is the server the URL's scheme names listening at that \
             address? a mysql:// URL at a PostgreSQL port, or a server that accepts and never answers, waits \
             forever); --answer-timeout-secs sets the limit",
            isocert_adapters::redact_url(url),
            limit.as_secs()
        ),
    }
}
