//! A memory bound for `isocert check`: the black-box solvers (cobra, polysi) keep per key a
//! relation over its writers and per open pair its edges, so their memory grows with the
//! square of the writes per key; on 1M one-transaction sessions they took 19 to 23 GB and
//! the kernel's OOM killer ended them (and could have ended anything else on a shared
//! machine). A watchdog thread reads the process's resident size (`VmRSS` in
//! `/proc/self/status`) every 50 ms and, past the limit, stops the command with exit 2 and
//! a message saying what it used, what the limit was and how to raise it. The limit
//! defaults to 90% of the memory the kernel says is available (`MemAvailable` plus
//! `SwapFree` in `/proc/meminfo`) when the command starts. Reading `/proc` is hand-written
//! (two lines of text) rather than a dependency: nothing else here needs one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the resident size is read.
const POLL: Duration = Duration::from_millis(50);

/// The running watchdog; dropping it stops the thread.
#[derive(Debug)]
pub(crate) struct MemoryGuard {
    stop: Arc<AtomicBool>,
}

impl Drop for MemoryGuard {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Starts the watchdog for `what` (named in the message) with `limit_mib` (`None`: the
/// default, 90% of what is available now; `Some(0)`: no limit). Without `/proc` (not
/// Linux) there is nothing to watch and no guard.
pub(crate) fn guard(what: String, limit_mib: Option<u64>) -> Option<MemoryGuard> {
    let (limit_kib, source) = match limit_mib {
        Some(0) => return None,
        Some(mib) => (mib.saturating_mul(1024), "--memory-limit-mib".to_string()),
        None => {
            let available = available_kib()?;
            (available / 10 * 9, format!("90% of the {} MiB available when it started", available / 1024))
        }
    };
    resident_kib()?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    std::thread::Builder::new()
        .name("memory-guard".into())
        .spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                if let Some(used) = resident_kib().filter(|&used| used > limit_kib) {
                    use std::io::Write as _;
                    let _ = writeln!(
                        std::io::stderr(),
                        "isocert: error: {what} used {} MiB, over its limit of {} MiB ({source}); stopped before \
                         the system runs out of memory. Give --memory-limit-mib to allow more (0: no limit), or a \
                         certificate (--certificate) so that emme, which needs far less, can check the history",
                        used / 1024,
                        limit_kib / 1024
                    );
                    #[allow(clippy::exit)]
                    std::process::exit(2);
                }
                std::thread::sleep(POLL);
            }
        })
        .ok()?;
    Some(MemoryGuard { stop })
}

/// The process's resident size in KiB.
fn resident_kib() -> Option<u64> {
    field_kib(&std::fs::read_to_string("/proc/self/status").ok()?, "VmRSS:")
}

/// Memory available to a new allocation without the OOM killer: `MemAvailable` plus
/// `SwapFree`, in KiB.
fn available_kib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    Some(field_kib(&text, "MemAvailable:")? + field_kib(&text, "SwapFree:").unwrap_or(0))
}

/// The value of the `name  N kB` line of a `/proc` file.
fn field_kib(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix(name))?.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_fields_are_read_in_kib() {
        let text = "MemTotal:       16316412 kB\nMemAvailable:    9876543 kB\nSwapFree:  0 kB\n";
        assert_eq!(field_kib(text, "MemAvailable:"), Some(9_876_543));
        assert_eq!(field_kib(text, "SwapFree:"), Some(0));
        assert_eq!(field_kib(text, "VmRSS:"), None);
        assert!(resident_kib().is_some_and(|kib| kib > 0));
        assert!(available_kib().is_some_and(|kib| kib > 0));
    }
}
