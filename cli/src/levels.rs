//! `isocert levels`: which isolation levels a history holds, in one command.
//!
//! Every level the history and its certificate let a checker decide is checked once (the
//! checker `isocert check --checker auto` would pick); a level no checker can decide for
//! this history is listed with the reason. The answer is a ladder: the strongest levels
//! that hold, the weakest that fail, and the anomaly classes that make them fail, which
//! are what separates the two. Levels are ordered by what each promises
//! ([`stronger_than`]): repeatable read (Adya's PL-2.99) and snapshot isolation, read
//! atomic and causal consistency are not all comparable, so "strongest" and "weakest" may
//! name more than one level.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use isocert_checker::{check_with, CheckerKind, IsolationLevel, Report, SessionOrder};
use isocert_history::formats::Format;
use isocert_history::v1;
use isocert_oracle::Interpreter;
use serde_json::json;

use crate::exit;

/// Check a history at every isolation level it can be checked at, and print the ladder.
///
/// Each level is checked once. Exit code 0: every level checked holds; 1: some level fails
/// (the ladder says which hold and which anomalies separate them); 2: the input could not
/// be used, or no level could be checked.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  isocert levels out/history.jsonl --certificate out/certificate.json\n  \
                        isocert levels history.edn --format elle --json"
)]
pub(crate) struct LevelsArgs {
    /// The history (v1 JSON Lines unless --format says otherwise).
    history: PathBuf,
    /// The version certificate (as for `isocert check`); without one, the levels a
    /// black-box checker decides for this history are checked.
    #[arg(short, long, value_name = "CERT")]
    certificate: Option<PathBuf>,
    /// The format of HISTORY (as for `isocert check`).
    #[arg(long, default_value = "v1", value_name = "FORMAT")]
    format: Format,
    /// Check Adya's definitions, without session order (as `isocert check --no-session-order`).
    #[arg(long)]
    no_session_order: bool,
    /// Print the ladder as JSON.
    #[arg(long)]
    json: bool,
}

/// Whether `a` promises everything `b` does (and more): strict serializable, serializable,
/// then snapshot isolation over causal, read atomic and read committed, and repeatable read
/// over read committed; read uncommitted at the bottom.
pub(crate) fn stronger_than(a: IsolationLevel, b: IsolationLevel) -> bool {
    use IsolationLevel::*;
    let above: &[IsolationLevel] = match a {
        StrictSerializable => &[Serializable],
        Serializable => &[SnapshotIsolation, RepeatableRead],
        SnapshotIsolation => &[Causal],
        Causal => &[ReadAtomic],
        ReadAtomic => &[ReadCommitted],
        RepeatableRead => &[ReadCommitted],
        ReadCommitted => &[ReadUncommitted],
        ReadUncommitted => &[],
    };
    above.iter().any(|&next| next == b || stronger_than(next, b))
}

/// One level's outcome.
enum Outcome {
    Holds(CheckerKind),
    Fails(Report),
    NotChecked(String),
}

/// The ladder: every level with its outcome, strongest first.
struct Ladder {
    rungs: Vec<(IsolationLevel, Outcome)>,
}

impl Ladder {
    fn holds(&self) -> impl Iterator<Item = IsolationLevel> + '_ {
        self.rungs.iter().filter(|(_, o)| matches!(o, Outcome::Holds(_))).map(|(l, _)| *l)
    }

    fn fails(&self) -> impl Iterator<Item = (IsolationLevel, &Report)> + '_ {
        self.rungs.iter().filter_map(|(l, o)| match o {
            Outcome::Fails(r) => Some((*l, r)),
            _ => None,
        })
    }

    /// The levels that hold with no stronger level holding.
    fn strongest_holding(&self) -> Vec<IsolationLevel> {
        self.holds().filter(|&l| !self.holds().any(|m| stronger_than(m, l))).collect()
    }

    /// The levels that fail with no weaker level failing.
    fn weakest_failing(&self) -> Vec<IsolationLevel> {
        self.fails().map(|(l, _)| l).filter(|&l| !self.fails().any(|(m, _)| stronger_than(l, m))).collect()
    }

    /// The anomaly classes the weakest failing levels report: what separates them from the
    /// levels below that hold.
    fn separating_classes(&self) -> Vec<&'static str> {
        let weakest = self.weakest_failing();
        let mut classes: Vec<&'static str> = self
            .fails()
            .filter(|(l, _)| weakest.contains(l))
            .flat_map(|(_, r)| r.anomalies.iter().map(|a| a.kind.as_str()))
            .collect();
        classes.sort_unstable();
        classes.dedup();
        classes
    }
}

/// Runs `isocert levels`.
pub(crate) fn run(args: LevelsArgs) -> anyhow::Result<ExitCode> {
    let (h, cert) =
        crate::check::load(&args.history, args.certificate.as_ref(), args.format, v1::AdapterFacts::Skip)?;
    anyhow::ensure!(!h.txns.is_empty(), "{}: the history has no transaction", args.history.display());
    let oracle =
        Interpreter::for_checking(&h).with_context(|| format!("history {}", args.history.display()))?;
    let session_order = if args.no_session_order { SessionOrder::Excluded } else { SessionOrder::Included };
    let mut rungs = Vec::new();
    for level in IsolationLevel::ALL.into_iter().rev() {
        let outcome = match check_with(&h, &cert, level, session_order, CheckerKind::Auto, &oracle) {
            Ok(report) if report.is_valid() => Outcome::Holds(report.checker),
            Ok(report) => Outcome::Fails(report),
            Err(e) => Outcome::NotChecked(e.to_string()),
        };
        rungs.push((level, outcome));
    }
    let ladder = Ladder { rungs };
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&ladder_json(&ladder))?)?;
    } else {
        write!(out, "{}", ladder_text(&ladder))?;
    }
    Ok(if ladder.holds().next().is_none() && ladder.fails().next().is_none() {
        exit::error()
    } else if ladder.fails().next().is_some() {
        exit::anomalies()
    } else {
        exit::valid()
    })
}

fn names(levels: &[IsolationLevel]) -> String {
    if levels.is_empty() {
        return "none".to_string();
    }
    levels.iter().map(|l| l.as_str()).collect::<Vec<_>>().join(", ")
}

/// The ladder in words: a summary line, then one line per level, strongest first.
fn ladder_text(ladder: &Ladder) -> String {
    let mut text = format!(
        "LEVELS: strongest that holds: {}; weakest that fails: {}",
        names(&ladder.strongest_holding()),
        names(&ladder.weakest_failing())
    );
    let separating = ladder.separating_classes();
    if !separating.is_empty() {
        text.push_str(&format!("; separated by: {}", separating.join(", ")));
    }
    text.push('\n');
    for (level, outcome) in &ladder.rungs {
        let line = match outcome {
            Outcome::Holds(checker) => format!("holds ({checker})"),
            Outcome::Fails(r) => {
                format!("FAILS ({}): {} anomalies ({})", r.checker, r.anomalies.len(), classes(r).join(", "))
            }
            Outcome::NotChecked(why) => format!("not checked: {why}"),
        };
        text.push_str(&format!("  {:<20} {line}\n", level.as_str()));
    }
    text
}

/// The anomaly classes of a report, each once, sorted.
fn classes(r: &Report) -> Vec<&'static str> {
    let mut k: Vec<&'static str> = r.anomalies.iter().map(|a| a.kind.as_str()).collect();
    k.sort_unstable();
    k.dedup();
    k
}

fn ladder_json(ladder: &Ladder) -> serde_json::Value {
    let levels: Vec<serde_json::Value> = ladder
        .rungs
        .iter()
        .map(|(level, outcome)| match outcome {
            Outcome::Holds(checker) => {
                json!({ "level": level.as_str(), "verdict": "holds", "checker": checker.to_string() })
            }
            Outcome::Fails(r) => json!({
                "level": level.as_str(),
                "verdict": "fails",
                "checker": r.checker.to_string(),
                "anomalies": r.anomalies.len(),
                "classes": classes(r),
            }),
            Outcome::NotChecked(why) => {
                json!({ "level": level.as_str(), "verdict": "not-checked", "reason": why })
            }
        })
        .collect();
    json!({
        "strongest_holding": ladder.strongest_holding().iter().map(|l| l.as_str()).collect::<Vec<_>>(),
        "weakest_failing": ladder.weakest_failing().iter().map(|l| l.as_str()).collect::<Vec<_>>(),
        "separating_classes": ladder.separating_classes(),
        "levels": levels,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_strength_order_is_a_partial_order_with_known_incomparable_pairs() {
        use IsolationLevel::*;
        for a in IsolationLevel::ALL {
            assert!(!stronger_than(a, a), "{a}");
            for b in IsolationLevel::ALL {
                assert!(!(stronger_than(a, b) && stronger_than(b, a)), "{a} {b}");
            }
            if a != ReadUncommitted {
                assert!(stronger_than(a, ReadUncommitted), "{a}");
            }
        }
        assert!(stronger_than(StrictSerializable, ReadAtomic));
        assert!(
            !stronger_than(SnapshotIsolation, RepeatableRead)
                && !stronger_than(RepeatableRead, SnapshotIsolation)
        );
        assert!(!stronger_than(RepeatableRead, Causal) && !stronger_than(Causal, RepeatableRead));
    }
}
