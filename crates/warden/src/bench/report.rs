//! The result of a run: a table for people, JSON (`--json`) for scripts.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::process::Usage;
use super::runner::Driver;
use super::stats::{Latency, OpKind, Stats, Summary};

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub tool: &'static str,
    pub version: &'static str,
    /// What the runner knew; its fields appear at the top level of the JSON.
    #[serde(flatten)]
    pub run: RunFacts,
    /// Requests answered without an error code.
    pub ok: u64,
    pub errors: u64,
    /// Successful requests per second of the measured window.
    pub throughput: f64,
    pub latency_us: Latency,
    pub by_op: BTreeMap<&'static str, OpRow>,
    pub errors_by_code: BTreeMap<String, u64>,
    pub watch_events: u64,
    pub server_cpu_seconds: Option<f64>,
    /// Successful requests per second of server CPU time: steadier than throughput on a shared
    /// machine.
    pub ops_per_server_cpu_second: Option<f64>,
    /// The bench's own CPU time per successful request, in microseconds.
    pub client_cpu_us_per_op: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StoppedBy {
    Duration,
    Requests,
    LoadComplete,
    TimeLimit,
    Interrupted,
    SessionsEnded,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct OpRow {
    pub ok: u64,
    pub errors: u64,
    pub throughput: f64,
    pub latency_us: Latency,
}

/// What the runner knows besides the counts.
#[derive(Clone, Debug, Serialize)]
pub struct RunFacts {
    /// Seconds since the Unix epoch when the run started.
    pub started_at_unix: u64,
    /// Seed of the random draws (operations, paths, values), for reproducing a run.
    pub seed: u64,
    pub workload: String,
    pub description: String,
    pub servers: Vec<String>,
    pub sessions: u32,
    pub pipeline: u32,
    pub warmup_seconds: f64,
    pub measured_seconds: f64,
    pub stopped_by: StoppedBy,
    pub sessions_ended_early: Vec<String>,
    /// One entry per `--pid`.
    pub servers_usage: Vec<Usage>,
    /// CPU time of the bench itself over the measured window.
    pub client_cpu_seconds: f64,
    pub driver: Driver,
    /// The run's znodes counted through the independent client against its acknowledged
    /// writes; `None` when the run was cut short at its time limit.
    pub znodes: Option<ZnodesCheck>,
}

/// Znodes the run's acknowledged writes made (creates less deletes), and the change in the
/// count of znodes under the root that the independent client found over the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ZnodesCheck {
    pub acknowledged: i64,
    pub found: i64,
}

impl ZnodesCheck {
    pub fn holds(self) -> bool {
        self.acknowledged == self.found
    }
}

impl Report {
    pub fn new(facts: RunFacts, stats: &Stats) -> Report {
        let measured_seconds = facts.measured_seconds;
        let per_second = |n: u64| {
            if measured_seconds > 0.0 {
                n as f64 / measured_seconds
            } else {
                0.0
            }
        };
        let row = |summary: Summary| OpRow {
            ok: summary.ok,
            errors: summary.errors,
            throughput: per_second(summary.ok),
            latency_us: summary.latency_us,
        };
        let by_op = OpKind::ALL
            .iter()
            .filter_map(|kind| Some((kind.name(), row(stats.summary(*kind)?))))
            .collect();
        let total = stats.total();
        let server_cpu_seconds = (!facts.servers_usage.is_empty()).then(|| {
            facts
                .servers_usage
                .iter()
                .map(|u| u.cpu_seconds)
                .sum::<f64>()
        });
        let ops_per_server_cpu_second = server_cpu_seconds
            .filter(|cpu| *cpu > 0.0)
            .map(|cpu| total.ok as f64 / cpu);
        let client_cpu_us_per_op = if total.ok > 0 {
            facts.client_cpu_seconds * 1e6 / total.ok as f64
        } else {
            0.0
        };
        Report {
            tool: "warden bench",
            version: env!("CARGO_PKG_VERSION"),
            run: facts,
            ok: total.ok,
            errors: total.errors,
            throughput: per_second(total.ok),
            latency_us: total.latency_us,
            by_op,
            errors_by_code: stats.errors_by_code().clone(),
            watch_events: stats.watch_events(),
            server_cpu_seconds,
            ops_per_server_cpu_second,
            client_cpu_us_per_op,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serializes")
    }

    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let w = &mut out;
        // Writing to a String cannot fail.
        let _ = writeln!(
            w,
            "workload {}: {}",
            self.run.workload, self.run.description
        );
        let _ = writeln!(
            w,
            "{} session(s) on {}, pipeline {}, warm-up {:.1} s, measured {:.2} s (stopped by {})",
            self.run.sessions,
            self.run.servers.join(","),
            self.run.pipeline,
            self.run.warmup_seconds,
            self.run.measured_seconds,
            self.run.stopped_by.describe(),
        );
        let _ = writeln!(w);
        let _ = writeln!(
            w,
            "{:<8} {:>10} {:>7} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "op",
            "ok",
            "errors",
            "ops/s",
            "avg ms",
            "p50 ms",
            "p90 ms",
            "p99 ms",
            "p99.9 ms",
            "max ms"
        );
        let total = OpRow {
            ok: self.ok,
            errors: self.errors,
            throughput: self.throughput,
            latency_us: self.latency_us,
        };
        let rows = OpKind::ALL
            .iter()
            .filter_map(|kind| Some((kind.name(), self.by_op.get(kind.name())?)));
        for (name, row) in rows.chain([("total", &total)]) {
            let l = &row.latency_us;
            let ms = |us: u64| us as f64 / 1000.0;
            let _ = writeln!(
                w,
                "{:<8} {:>10} {:>7} {:>10.1} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
                name,
                row.ok,
                row.errors,
                row.throughput,
                l.avg / 1000.0,
                ms(l.p50),
                ms(l.p90),
                ms(l.p99),
                ms(l.p999),
                ms(l.max)
            );
        }
        let _ = writeln!(w);
        let errors: Vec<String> = self
            .errors_by_code
            .iter()
            .map(|(code, n)| format!("{code} x{n}"))
            .collect();
        let _ = writeln!(
            w,
            "errors by code: {}",
            if errors.is_empty() {
                "none".to_string()
            } else {
                errors.join(", ")
            }
        );
        if self.watch_events > 0 {
            let _ = writeln!(w, "watch events received: {}", self.watch_events);
        }
        for ended in &self.run.sessions_ended_early {
            let _ = writeln!(w, "ended early: {ended}");
        }
        for usage in &self.run.servers_usage {
            let _ = writeln!(
                w,
                "server pid {} ({}): cpu {:.2} s ({:.0}% of one core), rss {} at start, {} at end, {} peak",
                usage.pid,
                usage.command,
                usage.cpu_seconds,
                percent(usage.cpu_seconds, self.run.measured_seconds),
                mib(usage.rss_bytes_start),
                mib(usage.rss_bytes_end),
                mib(usage.rss_bytes_peak)
            );
        }
        if let Some(ops) = self.ops_per_server_cpu_second {
            let _ = writeln!(w, "ops per server cpu-second: {ops:.0}");
        }
        let _ = writeln!(
            w,
            "bench client cpu ({} driver): {:.2} s ({:.0}% of one core), {:.1} µs per request",
            self.run.driver.name(),
            self.run.client_cpu_seconds,
            percent(self.run.client_cpu_seconds, self.run.measured_seconds),
            self.client_cpu_us_per_op
        );
        if let Some(check) = self.run.znodes {
            let verdict = if check.holds() { "match" } else { "MISMATCH" };
            let _ = writeln!(
                w,
                "znodes made by the run, counted through the independent client: {} against {} acknowledged ({verdict})",
                check.found, check.acknowledged
            );
        }
        out
    }
}

impl Driver {
    fn name(self) -> &'static str {
        match self {
            Driver::Client => "client",
            Driver::Lean => "lean",
        }
    }
}

impl StoppedBy {
    fn describe(self) -> &'static str {
        match self {
            StoppedBy::Duration => "duration",
            StoppedBy::Requests => "request count",
            StoppedBy::LoadComplete => "load complete",
            StoppedBy::TimeLimit => "TIME LIMIT, results partial",
            StoppedBy::Interrupted => "INTERRUPT, results partial",
            StoppedBy::SessionsEnded => "sessions ending early",
        }
    }
}

fn percent(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn sample_report() -> Report {
        let mut stats = Stats::default();
        for us in [100, 200, 300, 400] {
            stats.record_ok(OpKind::Get, Duration::from_micros(us));
        }
        stats.record_ok(OpKind::Create, Duration::from_micros(1000));
        stats.record_error(OpKind::Create, "NodeExists");
        let facts = RunFacts {
            started_at_unix: 1_700_000_000,
            seed: 5,
            workload: "mixed".into(),
            description: "a mix".into(),
            servers: vec!["127.0.0.1:2181".into()],
            sessions: 2,
            pipeline: 1,
            warmup_seconds: 1.0,
            measured_seconds: 2.0,
            stopped_by: StoppedBy::Duration,
            sessions_ended_early: vec![],
            servers_usage: vec![Usage {
                pid: 42,
                command: "java".into(),
                cpu_seconds: 0.5,
                rss_bytes_start: 100 << 20,
                rss_bytes_end: 110 << 20,
                rss_bytes_peak: 120 << 20,
            }],
            client_cpu_seconds: 0.25,
            driver: Driver::Lean,
            znodes: Some(ZnodesCheck {
                acknowledged: 1,
                found: 1,
            }),
        };
        Report::new(facts, &stats)
    }

    #[test]
    fn totals_rates_and_cpu_efficiency() {
        let report = sample_report();
        assert_eq!((report.ok, report.errors), (5, 1));
        assert_eq!(report.throughput, 2.5);
        assert_eq!(report.by_op["get"].throughput, 2.0);
        assert_eq!(report.by_op["create"].errors, 1);
        assert!(!report.by_op.contains_key("set"));
        assert_eq!(report.server_cpu_seconds, Some(0.5));
        assert_eq!(report.ops_per_server_cpu_second, Some(10.0));
    }

    #[test]
    fn the_table_has_a_row_per_op_and_a_total() {
        let table = sample_report().to_table();
        let rows: Vec<&str> = table
            .lines()
            .filter_map(|line| line.split_whitespace().next())
            .collect();
        let create = rows.iter().position(|r| *r == "create").unwrap();
        let get = rows.iter().position(|r| *r == "get").unwrap();
        let total = rows.iter().position(|r| *r == "total").unwrap();
        assert!(create < get && get < total, "{table}");
        let get_line = table.lines().find(|l| l.starts_with("get ")).unwrap();
        let cells: Vec<&str> = get_line.split_whitespace().collect();
        assert_eq!(
            cells,
            [
                "get", "4", "0", "2.0", "0.250", "0.200", "0.400", "0.400", "0.400", "0.400"
            ]
        );
        assert!(table.contains("errors by code: NodeExists x1"), "{table}");
        assert!(
            table.contains("server pid 42 (java): cpu 0.50 s (25% of one core)"),
            "{table}"
        );
        assert!(table.contains("ops per server cpu-second: 10"), "{table}");
        assert!(
            table.contains(
                "bench client cpu (lean driver): 0.25 s (12% of one core), 50000.0 µs per request"
            ),
            "{table}"
        );
        assert!(
            table.contains("independent client: 1 against 1 acknowledged (match)"),
            "{table}"
        );
    }

    #[test]
    fn json_has_the_fields_scripts_read() {
        let json: serde_json::Value = serde_json::from_str(&sample_report().to_json()).unwrap();
        for field in [
            "workload",
            "throughput",
            "latency_us",
            "by_op",
            "errors_by_code",
            "ops_per_server_cpu_second",
            "client_cpu_us_per_op",
            "driver",
            "znodes",
        ] {
            assert!(json.get(field).is_some(), "no {field} in {json}");
        }
        assert_eq!(json["stopped_by"], "duration");
        assert_eq!(json["latency_us"]["p999"], 1000);
        assert_eq!(json["by_op"]["get"]["latency_us"]["p50"], 200);
        assert_eq!(json["servers_usage"][0]["rss_bytes_peak"], 120 << 20);
    }
}
