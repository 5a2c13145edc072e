//! Tenants: who may ask for certificates, with which tokens, about which tables, how often.
//!
//! The tenants file (`--tenants FILE`, TOML) lists each tenant with the SHA-256 digests of
//! its tokens (never the tokens: `isocert serve --hash-token` prints a digest), the tables
//! it may see (`schema.table` or `schema.*`) and its request rate:
//!
//! ```toml
//! [[tenant]]
//! name = "acme"
//! token_sha256 = ["5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"]
//! tables = ["acme.*", "public.orders"]
//! requests_per_second = 20
//! # optional: where other writers' values are shown in certificates (see `Tenant`)
//! reveal_foreign_values = ["public.orders"]
//! ```
//!
//! The file is read again when it changes (checked every second) or on SIGHUP, so a token
//! can be revoked without a restart; a request authenticates again before its answer is
//! sent. A plaintext token exists only for the demo tenant of `isocert serve` without
//! `--db`, which is created in memory and never written to a tenants file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Instant, SystemTime};

use serde::Deserialize;
use sha2::{Digest, Sha256};

/// The default request rate of a token, per second (and the burst it may spend at once).
pub const DEFAULT_REQUESTS_PER_SECOND: u32 = 20;

/// A SHA-256 digest of a token.
pub type TokenDigest = [u8; 32];

/// The digest of `token`, as the tenants file lists it (lowercase hex).
pub fn token_digest_hex(token: &str) -> String {
    hex(&digest(token))
}

fn digest(token: &str) -> TokenDigest {
    Sha256::digest(token.trim().as_bytes()).into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn parse_hex(text: &str) -> Option<TokenDigest> {
    let text = text.trim();
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// What a tenant may see: one table, or every table of a schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The schema.
    pub schema: String,
    /// The table; `None` for every table of the schema (`schema.*`).
    pub table: Option<String>,
}

impl Grant {
    fn parse(text: &str) -> Option<Grant> {
        let (schema, table) = text.trim().split_once('.')?;
        if schema.is_empty() || table.is_empty() || table.contains('.') {
            return None;
        }
        let table = (table != "*").then(|| table.to_string());
        Some(Grant { schema: schema.to_string(), table })
    }

    /// Whether the grant covers `schema.table`.
    pub fn covers(&self, schema: &str, table: &str) -> bool {
        self.schema == schema && self.table.as_deref().is_none_or(|t| t == table)
    }
}

/// One tenant.
#[derive(Clone, Debug)]
pub struct Tenant {
    /// Its name (in logs and metrics; never a token).
    pub name: String,
    /// The tables it may see.
    pub grants: Vec<Grant>,
    /// Requests per second per token (also the burst).
    pub requests_per_second: u32,
    /// The tables whose foreign writers' values its certificates show (`reveal_foreign_values`,
    /// each within its grants). Elsewhere every version a transaction outside the submitted
    /// history wrote is opaque, so no answer depends on whether a history's claimed value
    /// equals a hidden one; here every such version of a row the history names carries its
    /// value, whether or not the history read it, which again makes nothing depend on a
    /// guess (docs/API.md, "What a tenant can and cannot see").
    pub reveal_foreign_values: Vec<Grant>,
}

impl Tenant {
    /// Whether the tenant may see `schema.table`.
    pub fn may_see(&self, schema: &str, table: &str) -> bool {
        self.grants.iter().any(|g| g.covers(schema, table))
    }

    /// Whether the tenant's certificates show the values other writers wrote in
    /// `schema.table`.
    pub fn reveals(&self, schema: &str, table: &str) -> bool {
        self.may_see(schema, table) && self.reveal_foreign_values.iter().any(|g| g.covers(schema, table))
    }
}

/// Why a tenants file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TenantsError {
    /// The file could not be read.
    #[error("reading tenants file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not valid TOML of the expected shape.
    #[error("tenants file {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the tenant or field.
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    tenant: Vec<RawTenant>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTenant {
    name: String,
    token_sha256: Vec<String>,
    tables: Vec<String>,
    requests_per_second: Option<u32>,
    #[serde(default)]
    reveal_foreign_values: Vec<String>,
}

/// Every tenant, by token digest.
#[derive(Debug, Default)]
pub struct Tenants {
    by_token: HashMap<TokenDigest, Arc<Tenant>>,
}

impl Tenants {
    /// Parses a tenants file's text (`path` only names it in errors).
    ///
    /// # Errors
    /// [`TenantsError::Invalid`] naming the tenant and field: bad TOML, an unknown field, a
    /// digest that is not 64 hex digits, a table that is not `schema.table` or `schema.*`,
    /// a token listed twice, a rate of 0.
    pub fn parse(text: &str, path: &Path) -> Result<Tenants, TenantsError> {
        let invalid = |message: String| TenantsError::Invalid { path: path.to_path_buf(), message };
        let raw: RawFile = toml::from_str(text).map_err(|e| invalid(e.message().to_string()))?;
        let mut tenants = Tenants::default();
        for (i, t) in raw.tenant.into_iter().enumerate() {
            let at = format!("tenant {} ({:?})", i + 1, t.name);
            let grants_of = |field: &str, list: &[String]| {
                list.iter()
                    .map(|g| {
                        Grant::parse(g).ok_or_else(|| {
                            invalid(format!("{at}: {field}: {g:?} is not schema.table or schema.*"))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()
            };
            let grants = grants_of("tables", &t.tables)?;
            let reveal_foreign_values = grants_of("reveal_foreign_values", &t.reveal_foreign_values)?;
            let requests_per_second = t.requests_per_second.unwrap_or(DEFAULT_REQUESTS_PER_SECOND);
            if requests_per_second == 0 {
                return Err(invalid(format!("{at}: requests_per_second must be at least 1")));
            }
            let mut tokens = Vec::new();
            for (k, text) in t.token_sha256.iter().enumerate() {
                let d = parse_hex(text).ok_or_else(|| {
                    invalid(format!("{at}: token_sha256[{k}] is not 64 hexadecimal digits"))
                })?;
                tokens.push(d);
            }
            let tenant =
                Arc::new(Tenant { name: t.name.clone(), grants, requests_per_second, reveal_foreign_values });
            for d in tokens {
                if tenants.by_token.insert(d, Arc::clone(&tenant)).is_some() {
                    return Err(invalid(format!("{at}: a token digest is listed twice")));
                }
            }
        }
        Ok(tenants)
    }

    /// The demo tenant of `isocert serve` without `--db`: plaintext `token`, every table
    /// of schema `public`.
    pub fn demo(token: &str) -> Tenants {
        let tenant = Arc::new(Tenant {
            name: "demo".into(),
            grants: vec![Grant { schema: "public".into(), table: None }],
            requests_per_second: DEFAULT_REQUESTS_PER_SECOND * 10,
            reveal_foreign_values: Vec::new(),
        });
        let mut tenants = Tenants::default();
        tenants.by_token.insert(digest(token), tenant);
        tenants
    }

    /// The tenant owning `token`.
    pub fn authenticate(&self, token: &str) -> Option<(TokenDigest, Arc<Tenant>)> {
        let d = digest(token);
        self.by_token.get(&d).map(|t| (d, Arc::clone(t)))
    }

    /// Number of tenants.
    pub fn len(&self) -> usize {
        let mut names: Vec<&str> = self.by_token.values().map(|t| t.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names.len()
    }

    /// Whether there is no tenant.
    pub fn is_empty(&self) -> bool {
        self.by_token.is_empty()
    }
}

/// The tenants in force, reloaded from their file when it changes.
#[derive(Debug)]
pub struct TenantRegistry {
    path: Option<PathBuf>,
    current: RwLock<Arc<Tenants>>,
    modified: Mutex<Option<SystemTime>>,
    buckets: Mutex<HashMap<TokenDigest, Bucket>>,
}

impl TenantRegistry {
    /// Reads `path`.
    ///
    /// # Errors
    /// The file's [`TenantsError`].
    pub fn from_file(path: &Path) -> Result<TenantRegistry, TenantsError> {
        let (tenants, modified) = read_file(path)?;
        Ok(TenantRegistry {
            path: Some(path.to_path_buf()),
            current: RwLock::new(Arc::new(tenants)),
            modified: Mutex::new(modified),
            buckets: Mutex::default(),
        })
    }

    /// Fixed tenants (the demo), never reloaded.
    pub fn fixed(tenants: Tenants) -> TenantRegistry {
        TenantRegistry {
            path: None,
            current: RwLock::new(Arc::new(tenants)),
            modified: Mutex::default(),
            buckets: Mutex::default(),
        }
    }

    /// The tenants in force.
    pub fn tenants(&self) -> Arc<Tenants> {
        Arc::clone(&self.current.read().expect("tenants lock"))
    }

    /// Reads the file again if it changed (or when `force`); a file that became invalid is
    /// reported and the tenants in force are kept.
    pub fn reload(&self, force: bool) {
        let Some(path) = &self.path else { return };
        let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        {
            let mut last = self.modified.lock().expect("modified lock");
            if !force && modified.is_some() && *last == modified {
                return;
            }
            *last = modified;
        }
        match read_file(path) {
            Ok((tenants, _)) => {
                tracing::info!(tenants = tenants.len(), "tenants file read");
                *self.current.write().expect("tenants lock") = Arc::new(tenants);
            }
            Err(e) => tracing::error!("{e}; keeping the tenants in force"),
        }
    }

    /// Takes one request from the token's bucket; `false` when its rate is exceeded.
    pub fn admit(&self, token: &TokenDigest, tenant: &Tenant) -> bool {
        let rate = f64::from(tenant.requests_per_second);
        let mut buckets = self.buckets.lock().expect("buckets lock");
        let bucket = buckets.entry(*token).or_insert_with(|| Bucket { tokens: rate, at: Instant::now() });
        bucket.take(rate)
    }
}

fn read_file(path: &Path) -> Result<(Tenants, Option<SystemTime>), TenantsError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| TenantsError::Io { path: path.to_path_buf(), source })?;
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    Ok((Tenants::parse(&text, path)?, modified))
}

/// A token bucket: `rate` requests per second, bursts of up to `rate`. Hand-written (a
/// dozen lines) rather than a rate-limiting crate because each tenant has its own rate
/// and tenants are reloaded at run time, which keyed limiters with one fixed quota do
/// not model; it is taken once per request, far from any hot loop.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn take(&mut self, rate: f64) -> bool {
        let now = Instant::now();
        self.tokens = (self.tokens + now.duration_since(self.at).as_secs_f64() * rate).min(rate);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[[tenant]]
name = "a"
token_sha256 = ["ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"]
tables = ["a.*", "public.orders"]

[[tenant]]
name = "b"
token_sha256 = ["3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d"]
tables = ["b.kv"]
requests_per_second = 2
reveal_foreign_values = ["b.*", "c.kv"]
"#;

    #[test]
    fn tokens_are_matched_by_digest_and_grants_by_table() {
        let tenants = Tenants::parse(FILE, Path::new("t.toml")).unwrap();
        assert_eq!(tenants.len(), 2);
        // sha256("a") and sha256("b").
        let (_, a) = tenants.authenticate("a").unwrap();
        assert_eq!(a.name, "a");
        assert!(a.may_see("a", "kv") && a.may_see("public", "orders"));
        assert!(!a.may_see("public", "kv") && !a.may_see("b", "kv"));
        let (_, b) = tenants.authenticate("b").unwrap();
        assert!(b.may_see("b", "kv") && !b.may_see("b", "items"));
        // Revealing other writers' values reaches no further than the grants.
        assert!(b.reveals("b", "kv") && !b.reveals("b", "items") && !b.reveals("c", "kv"));
        assert!(!a.reveals("a", "kv"), "values are hidden unless a grant reveals them");
        assert!(tenants.authenticate("c").is_none());
        assert!(tenants.authenticate(&token_digest_hex("a")).is_none(), "a digest is not a token");
    }

    #[test]
    fn bad_files_name_the_tenant_and_field() {
        let cases = [
            ("[[tenant]]\nname = \"x\"\ntoken_sha256 = [\"zz\"]\ntables = []\n", "token_sha256[0]"),
            (
                "[[tenant]]\nname = \"x\"\ntoken_sha256 = []\ntables = [\"kv\"]\n",
                "\"kv\" is not schema.table",
            ),
            ("[[tenant]]\nname = \"x\"\ntoken_sha256 = []\ntables = []\nrole = 1\n", "unknown field"),
            (
                "[[tenant]]\nname = \"x\"\ntoken_sha256 = []\ntables = []\nreveal_foreign_values = [\"kv\"]\n",
                "reveal_foreign_values: \"kv\" is not schema.table",
            ),
            (
                "[[tenant]]\nname = \"x\"\ntoken_sha256 = []\ntables = []\nrequests_per_second = 0\n",
                "at least 1",
            ),
        ];
        for (text, want) in cases {
            let e = Tenants::parse(text, Path::new("t.toml")).unwrap_err().to_string();
            assert!(e.contains(want), "{e} should contain {want}");
        }
    }

    #[test]
    fn a_bucket_admits_its_rate_then_refuses() {
        let tenants = Tenants::parse(FILE, Path::new("t.toml")).unwrap();
        let registry = TenantRegistry::fixed(tenants);
        let (d, b) = registry.tenants().authenticate("b").unwrap();
        assert!(registry.admit(&d, &b));
        assert!(registry.admit(&d, &b));
        assert!(!registry.admit(&d, &b), "the third request within a second exceeds 2/s");
    }
}
