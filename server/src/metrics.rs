//! Request counters and latencies in the Prometheus text format (`GET /metrics`).
//!
//! Written by hand: the exposition format for a few counters and sums is a dozen lines,
//! while the Prometheus crates bring a global registry (or their own HTTP listener) that a
//! server already built on axum does not need.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

/// Counts per (route, status) and latency sums per route.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    latency: Mutex<BTreeMap<String, (f64, u64)>>,
}

impl Metrics {
    /// Records one answered request.
    pub fn record(&self, route: &str, status: u16, seconds: f64) {
        *self.requests.lock().expect("metrics lock").entry((route.to_string(), status)).or_default() += 1;
        let mut latency = self.latency.lock().expect("metrics lock");
        let entry = latency.entry(route.to_string()).or_default();
        entry.0 += seconds;
        entry.1 += 1;
    }

    /// Requests answered with a 5xx status so far.
    pub fn server_errors(&self) -> u64 {
        self.requests
            .lock()
            .expect("metrics lock")
            .iter()
            .filter(|((_, s), _)| *s >= 500)
            .map(|(_, n)| n)
            .sum()
    }

    /// The exposition text, with `gauges` (name, help, value) appended.
    pub fn render(&self, gauges: &[(&str, &str, f64)]) -> String {
        let mut out = String::new();
        out.push_str("# HELP isocert_http_requests_total HTTP requests answered, by route and status.\n");
        out.push_str("# TYPE isocert_http_requests_total counter\n");
        for ((route, status), n) in self.requests.lock().expect("metrics lock").iter() {
            let _ = writeln!(out, "isocert_http_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}");
        }
        out.push_str("# HELP isocert_http_request_seconds Time to answer, by route.\n");
        out.push_str("# TYPE isocert_http_request_seconds summary\n");
        for (route, (sum, count)) in self.latency.lock().expect("metrics lock").iter() {
            let _ = writeln!(out, "isocert_http_request_seconds_sum{{route=\"{route}\"}} {sum}");
            let _ = writeln!(out, "isocert_http_request_seconds_count{{route=\"{route}\"}} {count}");
        }
        for (name, help, value) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_render_in_the_text_format() {
        let m = Metrics::default();
        m.record("/v1/certificates", 200, 0.5);
        m.record("/v1/certificates", 200, 0.25);
        m.record("/v1/check", 503, 1.0);
        let text = m.render(&[("isocert_feed_lag_bytes", "Bytes the feed is behind.", 42.0)]);
        assert!(
            text.contains("isocert_http_requests_total{route=\"/v1/certificates\",status=\"200\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("isocert_http_request_seconds_sum{route=\"/v1/certificates\"} 0.75\n"),
            "{text}"
        );
        assert!(text.contains("isocert_feed_lag_bytes 42\n"), "{text}");
        assert_eq!(m.server_errors(), 1);
    }
}
