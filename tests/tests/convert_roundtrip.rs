//! Issue 30, item 2: a certificate carried through a conversion names the converted
//! history's transactions (`isocert convert --certificate-out`). Cobra's logs are read back
//! in file-name order, dbcop's number sessions anew, most formats leave aborted
//! transactions out; pairing sessions by first appearance turned a VALID history into 3
//! anomalies and refused every conversion that dropped a transaction. Property: for every
//! pair of formats and every generated history (valid, and each injected kind Emme sees),
//! converting the history from v1 to the first format and on to the second, carrying the
//! certificate each time, and checking with Emme gives the original verdict.

use std::path::Path;

use isocert_checker::{check, CheckerKind, IsolationLevel, Report};
use isocert_gen::{generate, GenConfig, Injection};
use isocert_history::formats::{remap_certificate, Format, ALL_FORMATS};
use isocert_history::{Certificate, History};
use isocert_oracle::Interpreter;

fn verdict(h: &History, cert: &Certificate, level: IsolationLevel) -> Result<Report, String> {
    let oracle = Interpreter::new(h).map_err(|e| e.to_string())?;
    check(h, cert, level, CheckerKind::Emme, &oracle).map_err(|e| e.to_string())
}

/// The report, or `None` when the format holds no timestamps and the level needs them
/// (snapshot isolation in a format without start and commit times); any other error fails.
fn checkable(result: Result<Report, String>, what: &str) -> Option<Report> {
    match result {
        Ok(report) => Some(report),
        Err(e) if e.contains("no start_ts") => None,
        Err(e) => panic!("{what}: {e}"),
    }
}

/// Writes `h` as `format` into `dir`, reads it back and carries `cert` over; `None` when the
/// format cannot hold the history (a refusal naming what it cannot carry).
fn convert(
    h: &History,
    cert: &Certificate,
    format: Format,
    dir: &Path,
    name: &str,
) -> Option<(History, Certificate)> {
    let path = dir.join(format!("{name}.{format}"));
    format.write_path(h, &path).ok()?;
    let back = format
        .read_path(&path)
        .unwrap_or_else(|e| panic!("{format}: reading back what it wrote: {e}"))
        .history;
    let carried = remap_certificate(h, &back, cert)
        .unwrap_or_else(|e| panic!("{name}: {format} kept the history but not its certificate: {e}"));
    Some((back, carried))
}

fn histories() -> Vec<(String, GenConfig, IsolationLevel)> {
    let mut out = Vec::new();
    for seed in [0u64] {
        // With aborts (the formats that hold committed transactions only leave them out),
        // and one transaction in flight at a time (no aborts: Cobra's logs hold these).
        for concurrency in [0, 1] {
            let base = GenConfig {
                txns: 30,
                sessions: 4,
                keys: 6,
                seed,
                concurrency,
                isolation: IsolationLevel::Serializable,
                ..GenConfig::default()
            };
            out.push((format!("valid-{seed}-{concurrency}"), base.clone(), IsolationLevel::Serializable));
            for kind in
                Injection::ALL.into_iter().filter(|k| !k.needs_session_order() && !k.needs_predicates())
            {
                let level: IsolationLevel = kind.rejected_at()[0].parse().expect("a level name");
                let isolation = if level == IsolationLevel::SnapshotIsolation {
                    IsolationLevel::SnapshotIsolation
                } else {
                    IsolationLevel::Serializable
                };
                let cfg = GenConfig { inject: Some(kind), isolation, ..base.clone() };
                out.push((format!("{}-{seed}-{concurrency}", kind.as_str()), cfg, level));
            }
        }
    }
    out
}

#[test]
fn issue_30_certificates_carried_through_every_format_pair_keep_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let mut carried_by: std::collections::BTreeMap<String, usize> = Default::default();
    let (mut valid, mut invalid) = (0, 0);
    for (name, cfg, level) in histories() {
        let Ok(g) = generate(&cfg) else { continue };
        let Ok(original) = verdict(&g.history, &g.certificate, level) else { continue };
        if original.is_valid() {
            valid += 1;
        } else {
            invalid += 1;
        }
        for first in ALL_FORMATS {
            let Some((h1, c1)) = convert(&g.history, &g.certificate, first, dir.path(), &name) else {
                continue;
            };
            let Some(report) = checkable(verdict(&h1, &c1, level), &format!("{name} as {first}")) else {
                continue;
            };
            assert_eq!(
                report.is_valid(),
                original.is_valid(),
                "{name} as {first}: {:?}",
                report.anomalies.first()
            );
            *carried_by.entry(first.to_string()).or_default() += 1;
            for second in ALL_FORMATS {
                if first == Format::V1 {
                    // The first hop from v1 already went to every format.
                    continue;
                }
                let step = format!("{name}-{first}");
                let Some((h2, c2)) = convert(&h1, &c1, second, dir.path(), &step) else { continue };
                let what = format!("{name} as {first}, then {second}");
                let Some(report) = checkable(verdict(&h2, &c2, level), &what) else { continue };
                assert_eq!(
                    report.is_valid(),
                    original.is_valid(),
                    "{name} as {first}, then {second}: {:?}",
                    report.anomalies.first()
                );
            }
        }
    }
    assert!(valid >= 2 && invalid >= 10, "{valid} valid and {invalid} invalid histories checked");
    // AWDIT's test format has no initial state, which every generated history has (its
    // round trips are in isocert-history's format tests).
    for format in ALL_FORMATS.iter().filter(|f| !matches!(f, Format::Viper | Format::AwditTest)) {
        assert!(
            carried_by.get(&format.to_string()).is_some_and(|n| *n > 0),
            "{format} never carried a history: {carried_by:?}"
        );
    }
}
