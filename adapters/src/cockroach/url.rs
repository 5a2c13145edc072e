//! `cockroachdb://` URLs: the pgwire connection and its TLS settings.

use std::path::PathBuf;

use tokio_postgres::config::SslMode;

use crate::seam::{redact_url, DatabaseUrl};
use crate::AdapterError;
use crate::DatabaseKind;

/// How the connection is secured: CockroachDB's `sslmode` values that isocert accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsMode {
    /// `sslmode=disable` (the default; an `--insecure` cluster, as docker-compose.yml runs).
    Disable,
    /// `sslmode=require`: TLS, without checking the server's certificate.
    Require,
    /// `sslmode=verify-full`: TLS, the certificate checked against `sslrootcert` (or the
    /// public web roots, as CockroachDB Cloud needs) and the host name.
    VerifyFull,
}

impl TlsMode {
    /// The `sslmode` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TlsMode::Disable => "disable",
            TlsMode::Require => "require",
            TlsMode::VerifyFull => "verify-full",
        }
    }
}

/// A parsed `cockroachdb://user:password@host:26257/database?sslmode=...&sslrootcert=...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CockroachUrl {
    /// The same URL as `postgresql://`, without the TLS parameters (tokio-postgres reads it).
    pub pg_url: String,
    /// The database the workload's table goes in (`defaultdb` when the URL names none).
    pub database: String,
    /// `sslmode`.
    pub tls: TlsMode,
    /// `sslrootcert`: a PEM file of the CA that signed the server's certificate.
    pub root_cert: Option<PathBuf>,
}

impl CockroachUrl {
    /// Parses `url` (scheme `cockroachdb` or `cockroach`).
    ///
    /// # Errors
    /// Another scheme, an `sslmode` other than disable, require or verify-full, or
    /// `sslrootcert` without TLS; the message never shows the password.
    pub fn parse(url: &str) -> Result<Self, AdapterError> {
        let parsed = DatabaseUrl::parse(url, DatabaseKind::CockroachDb, "cockroachdb://HOST:26257/DATABASE")?;
        let bad = |message: String| parsed.error(message);
        let mut database = parsed.database().to_string();
        if database.is_empty() {
            database = "defaultdb".to_string();
        }
        let mut tls = TlsMode::Disable;
        let mut root_cert = None;
        let mut passed: Vec<&str> = Vec::new();
        for option in parsed.options() {
            match (option.key, option.value) {
                ("sslmode", Some("disable")) => tls = TlsMode::Disable,
                ("sslmode", Some("require")) => tls = TlsMode::Require,
                ("sslmode", Some("verify-full")) => tls = TlsMode::VerifyFull,
                ("sslmode", Some(other)) => {
                    return Err(bad(format!(
                        "sslmode={other}: use disable, require or verify-full (verify-ca is not offered: \
                         verify-full checks the same CA and the host name)"
                    )));
                }
                ("sslrootcert", Some(path)) => root_cert = Some(PathBuf::from(path)),
                ("sslcert" | "sslkey", Some(_)) => {
                    return Err(bad(
                        "client certificates (sslcert, sslkey) are not supported: log in with a password \
                         (cockroachdb://user:password@host:26257/db?sslmode=verify-full)"
                            .into(),
                    ));
                }
                _ => passed.push(option.text),
            }
        }
        if root_cert.is_some() && tls != TlsMode::VerifyFull {
            return Err(bad("sslrootcert is only read with sslmode=verify-full".into()));
        }
        let mut pg_url = format!("postgresql://{}/{database}", parsed.authority());
        if !passed.is_empty() {
            pg_url.push('?');
            pg_url.push_str(&passed.join("&"));
        }
        Ok(CockroachUrl { pg_url, database, tls, root_cert })
    }

    /// The tokio-postgres configuration (TLS required unless `sslmode=disable`).
    ///
    /// # Errors
    /// A URL tokio-postgres refuses.
    pub fn config(&self) -> Result<tokio_postgres::Config, AdapterError> {
        let mut config: tokio_postgres::Config = self
            .pg_url
            .parse()
            .map_err(|e| AdapterError::Protocol { message: format!("{}: {e}", redact_url(&self.pg_url)) })?;
        config.ssl_mode(if self.tls == TlsMode::Disable { SslMode::Disable } else { SslMode::Require });
        if config.get_application_name().is_none() {
            config.application_name("isocert");
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_parameters_are_ours_and_the_rest_goes_to_the_driver() {
        let u = CockroachUrl::parse("cockroachdb://root@127.0.0.1:26257/defaultdb?sslmode=disable").unwrap();
        assert_eq!(u.pg_url, "postgresql://root@127.0.0.1:26257/defaultdb");
        assert_eq!((u.database.as_str(), u.tls), ("defaultdb", TlsMode::Disable));
        let u = CockroachUrl::parse(
            "cockroachdb://u:pw@h.cloud:26257/bank?sslmode=verify-full&sslrootcert=/c/ca.crt&options=--cluster%3Dx",
        )
        .unwrap();
        assert_eq!(u.pg_url, "postgresql://u:pw@h.cloud:26257/bank?options=--cluster%3Dx");
        assert_eq!(u.tls, TlsMode::VerifyFull);
        assert_eq!(u.root_cert.as_deref(), Some(std::path::Path::new("/c/ca.crt")));
        let u = CockroachUrl::parse("cockroach://root@h?sslmode=require").unwrap();
        assert_eq!((u.database.as_str(), u.tls), ("defaultdb", TlsMode::Require));
        assert_eq!(u.config().unwrap().get_ssl_mode(), SslMode::Require);
        let e = CockroachUrl::parse("cockroachdb://u:s3cret@h/db?sslmode=verify-ca").unwrap_err().to_string();
        assert!(e.contains("sslmode=verify-ca") && !e.contains("s3cret"), "{e}");
        let e = CockroachUrl::parse("cockroachdb://u@h/db?sslrootcert=/ca.crt").unwrap_err().to_string();
        assert!(e.contains("verify-full"), "{e}");
        assert!(CockroachUrl::parse("postgres://h/db").is_err());
    }
}
