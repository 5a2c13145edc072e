//! [`DatabaseUrl`]: a database URL read once, by the `url` crate, for the adapters whose
//! driver does not take the user's URL as it is (TiDB, CockroachDB, Dgraph). Each adapter
//! keeps its own defaults (ports, database names) and its own query options; this type
//! checks the scheme, splits user, password, host, port, database and options, and words
//! every refusal with the URL redacted ([`redact_url`]: never a password).

use url::{Position, Url};

use super::{redact_url, DatabaseKind};
use crate::AdapterError;

/// A parsed `SCHEME://user:password@host:port/database?key=value&...` of one database.
#[derive(Clone, Debug)]
pub struct DatabaseUrl {
    /// The text as given (for messages, redacted).
    text: String,
    url: Url,
}

/// One `key=value` (or bare `key`) of a URL's query, as written (not percent-decoded:
/// options the adapter does not read go to the driver unchanged).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UrlOption<'a> {
    /// The whole `key=value` text.
    pub text: &'a str,
    /// The key.
    pub key: &'a str,
    /// The value, if the option has a `=`.
    pub value: Option<&'a str>,
}

impl DatabaseUrl {
    /// Parses `text`, whose scheme must be one of `kind`'s (any ASCII case); `shape` is the
    /// URL's form the "needs a host" error shows (`dgraph://HOST:8080`).
    ///
    /// # Errors
    /// Another scheme, no host where one is written (`x://:8080`), or a URL the `url` crate
    /// refuses (an invalid port, say); the message shows the URL without its password.
    pub fn parse(text: &str, kind: DatabaseKind, shape: &str) -> Result<Self, AdapterError> {
        let bad = |message: String| refused(text, &message);
        let scheme_fits = text
            .split_once("://")
            .is_some_and(|(scheme, _)| kind.schemes().iter().any(|s| scheme.eq_ignore_ascii_case(s)));
        if !scheme_fits {
            return Err(bad(format!("a {} URL starts with {}://", kind.display_name(), kind.as_str())));
        }
        let url = Url::parse(text).map_err(|e| match e {
            url::ParseError::EmptyHost => {
                bad(format!("a {} URL needs a host ({shape})", kind.display_name()))
            }
            other => bad(other.to_string()),
        })?;
        Ok(DatabaseUrl { text: text.to_string(), url })
    }

    /// An error about this URL: `message` after the URL without its password.
    pub fn error(&self, message: impl AsRef<str>) -> AdapterError {
        refused(&self.text, message.as_ref())
    }

    /// Whether the URL carries a user or a password.
    pub fn has_credentials(&self) -> bool {
        !self.url[Position::BeforeUsername..Position::BeforeHost].is_empty()
    }

    /// The host as written (`[::1]` for an IPv6 address); empty when there is none.
    pub fn host(&self) -> &str {
        self.url.host_str().unwrap_or("")
    }

    /// The port, when the URL names one.
    pub fn port(&self) -> Option<u16> {
        self.url.port()
    }

    /// `user:password@host:port` as written (percent-encoded where the URL standard says).
    pub fn authority(&self) -> &str {
        &self.url[Position::BeforeUsername..Position::AfterPort]
    }

    /// The authority and the path, without the scheme and the query.
    pub fn authority_and_path(&self) -> &str {
        &self.url[Position::BeforeUsername..Position::AfterPath]
    }

    /// The path without its leading `/` and trailing `/`s: the database, or `""`.
    pub fn database(&self) -> &str {
        let path = self.url.path();
        path.strip_prefix('/').unwrap_or(path).trim_end_matches('/')
    }

    /// The query's options in order (empty ones skipped).
    pub fn options(&self) -> impl Iterator<Item = UrlOption<'_>> {
        self.url.query().unwrap_or("").split('&').filter(|p| !p.is_empty()).map(|text| {
            let (key, value) = text.split_once('=').map_or((text, None), |(k, v)| (k, Some(v)));
            UrlOption { text, key, value }
        })
    }
}

/// The error for URL `text`: `message` after the URL without its password.
fn refused(text: &str, message: &str) -> AdapterError {
    AdapterError::Protocol { message: format!("{}: {message}", redact_url(text)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_split_once_and_refusals_never_show_the_password() {
        let u =
            DatabaseUrl::parse("TiDB://root:pw@10.0.0.5:4000/test/?a=1&&b", DatabaseKind::TiDb, "").unwrap();
        assert_eq!((u.host(), u.port(), u.database()), ("10.0.0.5", Some(4000), "test"));
        assert_eq!(u.authority(), "root:pw@10.0.0.5:4000");
        assert_eq!(u.authority_and_path(), "root:pw@10.0.0.5:4000/test/");
        assert!(u.has_credentials());
        let options: Vec<_> = u.options().map(|o| (o.key, o.value)).collect();
        assert_eq!(options, [("a", Some("1")), ("b", None)]);
        let u = DatabaseUrl::parse("dgraph://[::1]:9", DatabaseKind::Dgraph, "").unwrap();
        assert_eq!((u.host(), u.port(), u.database(), u.has_credentials()), ("[::1]", Some(9), "", false));
        for (url, kind, says) in [
            ("mysql://u:s3cret@h/db", DatabaseKind::TiDb, "a TiDB URL starts with tidb://"),
            ("h:4000", DatabaseKind::TiDb, "starts with tidb://"),
            (
                "dgraph://u:s3cret@:8080",
                DatabaseKind::Dgraph,
                "a Dgraph URL needs a host (dgraph://HOST:8080)",
            ),
            ("cockroachdb://u:s3cret@h:99999/db", DatabaseKind::CockroachDb, "invalid port number"),
        ] {
            let e = DatabaseUrl::parse(url, kind, "dgraph://HOST:8080").unwrap_err().to_string();
            assert!(e.contains(says) && !e.contains("s3cret"), "{url}: {e}");
        }
        let e = DatabaseUrl::parse("tidb://u:s3cret@h/db", DatabaseKind::TiDb, "")
            .unwrap()
            .error("no")
            .to_string();
        assert_eq!(e, "unexpected answer from the database: tidb://u:***@h/db: no");
    }
}
