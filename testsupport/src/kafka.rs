//! A real Kafka broker for tests: the one named by `ISOCERT_TEST_KAFKA`, or a private
//! [tansu](https://tansu.io) broker (an Apache Kafka-compatible broker written in Rust,
//! in-memory storage) started on a free loopback port and stopped when the handle drops.
//!
//! Why a real broker: librdkafka's mock broker creates any topic it is asked about, while a
//! production broker configured with `auto.create.topics.enable=false` (and tansu, whose
//! Metadata and Produce handlers never create topics) refuses what was not created. A test
//! that must see that difference runs here.
//!
//! The broker runs under a small `sh` watchdog that holds the read end of a pipe whose write
//! end only this process has: when this process ends in any way (a panic, SIGKILL, a crash in
//! a C library), the pipe closes and the watchdog kills the broker, so no broker outlives its
//! tests.
//!
//! The tansu program is found through `ISOCERT_TANSU` (a path) or as `tansu` on `PATH`;
//! `scripts/install-deps --test` installs it. When neither a broker URL nor the program is
//! there, [`KafkaBroker::start`] skips the test visibly (`SKIPPED: ...`), and under
//! `CI=true` fails it, like every other test server ([`crate::skip`]).

use std::io::Read as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crate::TestServer;

/// Kafka: `ISOCERT_TEST_KAFKA` (`host:port` bootstrap servers of a running broker that does
/// not auto-create topics), or a private tansu broker when the program is installed.
pub const KAFKA: TestServer = TestServer {
    name: "Kafka",
    env: "ISOCERT_TEST_KAFKA",
    hint: "install the tansu broker with scripts/install-deps --test (or set ISOCERT_TANSU to its path)",
};

/// The environment variable naming the tansu program, when it is not `tansu` on `PATH`.
pub const TANSU_ENV: &str = "ISOCERT_TANSU";

/// How long a started broker may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A Kafka broker a test talks to; a broker this process started is killed on drop.
#[derive(Debug)]
pub struct KafkaBroker {
    bootstrap: String,
    process: Option<BrokerProcess>,
}

/// The watchdog behind a started broker, the pipe that keeps the broker alive, and the file
/// the broker's output goes to.
#[derive(Debug)]
struct BrokerProcess {
    child: Child,
    lifeline: Option<ChildStdin>,
    log: PathBuf,
}

/// Runs `"$@"` (the broker) and kills it once its standard input (the lifeline pipe)
/// reaches end of file; exits with the broker's status when the broker ends first. fd 3
/// keeps the pipe for the reader (a background list's standard input is /dev/null in a
/// non-interactive shell), and only the reader holds it.
const WATCHDOG: &str = r#"exec 3<&0 0</dev/null
"$@" 3<&- & broker=$!
(while read -r _ <&3; do :; done; kill $broker 2>/dev/null) &
reader=$!
exec 3<&-
wait $broker
status=$?
kill $reader 2>/dev/null
exit $status"#;

impl KafkaBroker {
    /// The broker of `ISOCERT_TEST_KAFKA`, else a private tansu broker; `None` after a
    /// visible skip when there is neither (a failure under `CI=true`).
    ///
    /// # Panics
    /// When the tansu program is there but the broker does not start (its output is in the
    /// message): a broken install must not pass as a skip.
    pub fn start() -> Option<KafkaBroker> {
        if let Some(bootstrap) = KAFKA.env_url() {
            return Some(KafkaBroker { bootstrap, process: None });
        }
        let Some(program) = tansu_program() else {
            crate::skip(&format!(
                "{} is not set and the tansu broker is not installed (no {TANSU_ENV}, no tansu on PATH); {}",
                KAFKA.env, KAFKA.hint
            ));
            return None;
        };
        Some(Self::start_tansu(&program).unwrap_or_else(|e| panic!("starting {}: {e}", program.display())))
    }

    /// Starts `program` as an in-memory tansu broker on a free loopback port and waits until
    /// it accepts connections.
    ///
    /// # Errors
    /// The program cannot be run, exits, or does not listen within 30 s (with its output).
    pub fn start_tansu(program: &Path) -> Result<KafkaBroker, String> {
        let mut last = String::new();
        // The free port is found by binding and releasing it; another process may take it
        // in between, so a broker that exits at once is tried again on another port.
        for _ in 0..3 {
            let port = free_loopback_port().map_err(|e| format!("finding a free loopback port: {e}"))?;
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let log = std::env::temp_dir().join(format!("isocert-tansu-{}-{port}.log", std::process::id()));
            let out = std::fs::File::create(&log).map_err(|e| format!("creating {}: {e}", log.display()))?;
            let err = out.try_clone().map_err(|e| format!("{}: {e}", log.display()))?;
            let url = format!("tcp://{addr}");
            let mut child = Command::new("sh")
                .args(["-c", WATCHDOG, "isocert-tansu-watchdog"])
                .arg(program)
                .arg("broker")
                .args(["--listener-url", &url, "--advertised-listener-url", &url])
                .args(["--storage-engine", "memory://tansu/", "--cluster-id", "isocert-test"])
                .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
                .stdin(Stdio::piped())
                .stdout(out)
                .stderr(err)
                .spawn()
                .map_err(|e| format!("running {} under sh: {e}", program.display()))?;
            let lifeline = child.stdin.take();
            let process = BrokerProcess { child, lifeline, log };
            let mut broker = KafkaBroker { bootstrap: addr.to_string(), process: Some(process) };
            match broker.wait_listening(addr) {
                Ok(()) => return Ok(broker),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Waits until the broker accepts a connection on `addr`, or says why not.
    fn wait_listening(&mut self, addr: SocketAddr) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            let process = self.process.as_mut().expect("a started broker has a process");
            if let Ok(Some(status)) = process.child.try_wait() {
                return Err(format!(
                    "the broker exited ({status}) before listening on {addr}:\n{}",
                    self.output()
                ));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "the broker did not listen on {addr} within {START_TIMEOUT:?}:\n{}",
                    self.output()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The bootstrap servers (`127.0.0.1:PORT` for a started broker).
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// Whether this process started the broker (it is then private, empty at start and
    /// gone after drop).
    pub fn is_private(&self) -> bool {
        self.process.is_some()
    }

    /// What the started broker printed so far (its last 4 kB), for failure messages.
    pub fn output(&self) -> String {
        let Some(process) = &self.process else { return String::new() };
        let mut text = String::new();
        if let Ok(mut file) = std::fs::File::open(&process.log) {
            let _ = file.read_to_string(&mut text);
        }
        let start = text.len().saturating_sub(4096);
        let start = (start..text.len()).find(|&i| text.is_char_boundary(i)).unwrap_or(text.len());
        text[start..].to_string()
    }
}

impl Drop for KafkaBroker {
    fn drop(&mut self) {
        if let Some(mut process) = self.process.take() {
            // Closing the lifeline makes the watchdog kill the broker and wait for it.
            drop(process.lifeline.take());
            let _ = process.child.wait();
            let _ = std::fs::remove_file(&process.log);
        }
    }
}

/// The tansu program: `ISOCERT_TANSU`, else `tansu` on `PATH` or in cargo's bin folder.
pub fn tansu_program() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(TANSU_ENV).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let cargo_bin = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .map(|home| home.join("bin"));
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .chain(cargo_bin)
        .map(|dir| dir.join("tansu"))
        .find(|candidate| candidate.is_file())
}

/// A loopback port nothing listens on right now.
fn free_loopback_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_that_is_not_a_broker_is_an_error_with_its_output() {
        let e = KafkaBroker::start_tansu(Path::new("/bin/false")).unwrap_err();
        assert!(e.contains("exited"), "{e}");
        let e = KafkaBroker::start_tansu(Path::new("/nonexistent/tansu")).unwrap_err();
        assert!(e.contains("exited") && e.contains("/nonexistent/tansu"), "{e}");
    }

    /// The watchdog kills the broker when the lifeline closes, as it does when the test
    /// process dies: here a stand-in broker (`sleep`) under the same watchdog.
    #[test]
    fn the_watchdog_kills_the_broker_when_the_lifeline_closes() {
        let mut child = Command::new("sh")
            .args(["-c", WATCHDOG, "watchdog", "sleep", "300"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lifeline = child.stdin.take();
        std::thread::sleep(Duration::from_millis(200));
        assert!(child.try_wait().unwrap().is_none(), "the watchdog waits while the lifeline is open");
        let started = Instant::now();
        drop(lifeline);
        child.wait().unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the stand-in broker was killed, not waited out"
        );
    }

    /// With tansu installed, a private broker listens on loopback and is gone after drop.
    #[test]
    fn a_private_broker_listens_until_dropped() {
        let Some(program) = tansu_program() else {
            crate::skip("tansu is not installed; scripts/install-deps --test");
            return;
        };
        let broker = KafkaBroker::start_tansu(&program).unwrap();
        let addr: SocketAddr = broker.bootstrap().parse().unwrap();
        assert!(addr.ip().is_loopback() && broker.is_private());
        assert!(TcpStream::connect(addr).is_ok());
        drop(broker);
        assert!(TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_err(), "still listening");
    }
}
