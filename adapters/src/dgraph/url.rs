//! `dgraph://` URLs: where Dgraph Alpha's HTTP port is.

use crate::seam::DatabaseUrl;
use crate::{AdapterError, DatabaseKind};

/// Dgraph Alpha's default HTTP port.
const HTTP_PORT: u16 = 8080;

/// A parsed `dgraph://host:8080` (`dgraph://host:8080?tls=true` for HTTPS).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DgraphUrl {
    /// The HTTP base URL requests go to (`http://host:8080`).
    pub http_url: String,
}

impl DgraphUrl {
    /// Parses `url` (scheme `dgraph`; port 8080 when none is given).
    ///
    /// # Errors
    /// A URL of another scheme, without a host, with a path, or with an unknown parameter.
    pub fn parse(url: &str) -> Result<Self, AdapterError> {
        let parsed = DatabaseUrl::parse(url, DatabaseKind::Dgraph, "dgraph://HOST:8080")?;
        let bad = |message: String| parsed.error(message);
        if !parsed.database().is_empty() {
            return Err(bad(
                "a Dgraph URL names only Alpha's HTTP address (dgraph://HOST:8080): Dgraph has no databases"
                    .into(),
            ));
        }
        if parsed.has_credentials() {
            return Err(bad("isocert does not send credentials to Dgraph (no user in the URL)".into()));
        }
        if parsed.host().is_empty() {
            return Err(bad("a Dgraph URL needs a host (dgraph://HOST:8080)".into()));
        }
        let mut tls = false;
        for option in parsed.options() {
            match (option.key, option.value) {
                ("tls", Some("true")) => tls = true,
                ("tls", Some("false")) => tls = false,
                _ => return Err(bad(format!("unknown parameter {:?} (only tls=true|false)", option.text))),
            }
        }
        let scheme = if tls { "https" } else { "http" };
        let port = parsed.port().unwrap_or(HTTP_PORT);
        Ok(DgraphUrl { http_url: format!("{scheme}://{}:{port}", parsed.host()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_names_alphas_http_port() {
        assert_eq!(DgraphUrl::parse("dgraph://127.0.0.1:8080").unwrap().http_url, "http://127.0.0.1:8080");
        assert_eq!(DgraphUrl::parse("dgraph://alpha/").unwrap().http_url, "http://alpha:8080");
        assert_eq!(DgraphUrl::parse("DGRAPH://h:1?tls=true").unwrap().http_url, "https://h:1");
        assert_eq!(DgraphUrl::parse("dgraph://[::1]:9").unwrap().http_url, "http://[::1]:9");
        for (url, says) in [
            ("http://h:8080", "dgraph://"),
            ("dgraph://h:8080/db", "no databases"),
            ("dgraph://:8080", "needs a host"),
            ("dgraph://h?ro=true", "ro=true"),
            ("dgraph://u:s3cret@h", "credentials"),
        ] {
            let e = DgraphUrl::parse(url).unwrap_err().to_string();
            assert!(e.contains(says) && !e.contains("s3cret"), "{url}: {e}");
        }
    }
}
