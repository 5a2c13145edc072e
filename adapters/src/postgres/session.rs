//! Connecting to PostgreSQL the way every isocert component does.

use tokio_postgres::{Client, NoTls};

use crate::AdapterError;

/// Connects to `url` without TLS and drives the connection on a spawned tokio task.
///
/// The task ends when the client is dropped or the server goes away; its error, if any,
/// surfaces on the client's next request.
///
/// # Errors
/// [`AdapterError::Db`] when the connection cannot be made.
pub async fn connect(url: &str) -> Result<Client, AdapterError> {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(|e| AdapterError::db(format!("connecting to {}", crate::seam::redact_url(url)), e))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!("PostgreSQL connection ended: {e}");
        }
    });
    Ok(client)
}
