//! Connecting over pgwire with or without TLS (rustls), as the URL's `sslmode` says.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::{Client, NoTls};

use super::url::{CockroachUrl, TlsMode};
use crate::seam::{redact_url, DbError, ErrorClass};

/// The rustls configuration for `url`'s `sslmode` (`None` for `disable`).
///
/// # Errors
/// An unreadable or empty `sslrootcert` file (fatal: retrying cannot help).
pub(crate) fn client_config(url: &CockroachUrl) -> Result<Option<ClientConfig>, DbError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let fatal = |message: String| DbError::new(ErrorClass::Fatal, None, "setting up TLS", message);
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| fatal(e.to_string()))?;
    Ok(match url.tls {
        TlsMode::Disable => None,
        TlsMode::Require => Some(
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth(),
        ),
        TlsMode::VerifyFull => {
            let mut roots = RootCertStore::empty();
            match &url.root_cert {
                Some(path) => {
                    let certs = CertificateDer::pem_file_iter(path)
                        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                        .map_err(|e| fatal(format!("sslrootcert {}: {e}", path.display())))?;
                    let (added, _) = roots.add_parsable_certificates(certs);
                    if added == 0 {
                        return Err(fatal(format!("sslrootcert {}: no usable certificate", path.display())));
                    }
                }
                None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
            }
            Some(builder.with_root_certificates(roots).with_no_client_auth())
        }
    })
}

/// Connects to `url` and drives the connection on a spawned task.
///
/// # Errors
/// The connection cannot be made, classified by `classify`.
pub(crate) async fn connect(
    url: &CockroachUrl,
    classify: fn(&tokio_postgres::Error) -> ErrorClass,
) -> Result<Client, DbError> {
    let config = url.config().map_err(|e| DbError::new(ErrorClass::Fatal, None, "reading the URL", e))?;
    let context = || {
        format!("connecting to {}", redact_url(&url.pg_url).replacen("postgresql://", "cockroachdb://", 1))
    };
    let error = |e: tokio_postgres::Error| {
        DbError::new(classify(&e), e.code().map(|c| c.code().to_string()), context(), e)
    };
    let client = match client_config(url)? {
        None => {
            let (client, connection) = config.connect(NoTls).await.map_err(error)?;
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!("CockroachDB connection ended: {e}");
                }
            });
            client
        }
        Some(tls) => {
            let tls = tokio_postgres_rustls::MakeRustlsConnect::new(tls);
            let (client, connection) = config.connect(tls).await.map_err(error)?;
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!("CockroachDB connection ended: {e}");
                }
            });
            client
        }
    };
    Ok(client)
}

/// `sslmode=require`: encryption without authentication of the server (libpq's meaning).
/// Signatures are still checked, so the session is bound to the key the server showed.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sslmode_gets_its_configuration_and_a_bad_root_file_is_named() {
        let parse = |u: &str| CockroachUrl::parse(u).unwrap();
        assert!(client_config(&parse("cockroachdb://root@h/db")).unwrap().is_none());
        assert!(client_config(&parse("cockroachdb://root@h/db?sslmode=require")).unwrap().is_some());
        assert!(client_config(&parse("cockroachdb://root@h/db?sslmode=verify-full")).unwrap().is_some());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.crt");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let url =
            parse(&format!("cockroachdb://root@h/db?sslmode=verify-full&sslrootcert={}", path.display()));
        let e = client_config(&url).unwrap_err().to_string();
        assert!(e.contains("ca.crt") && e.contains("no usable certificate"), "{e}");
        let url = parse("cockroachdb://root@h/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.crt");
        assert!(client_config(&url).unwrap_err().to_string().contains("/nonexistent/ca.crt"));
    }
}
