//! What a run counted: a latency histogram per kind of request, and errors by code.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Latencies are recorded in microseconds up to this bound; slower requests count as this slow.
pub const LATENCY_US_MAX: u64 = 600_000_000;
/// Three significant digits keep p99.9 within 0.1% at about 150 KiB per histogram.
const LATENCY_SIGNIFICANT_DIGITS: u8 = 3;

/// The kinds of request a report has a row for (and a workload file names, in snake case).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    Create,
    Delete,
    Set,
    Get,
    Exists,
    List,
    Multi,
}

impl OpKind {
    pub const ALL: [OpKind; 7] = [
        OpKind::Create,
        OpKind::Delete,
        OpKind::Set,
        OpKind::Get,
        OpKind::Exists,
        OpKind::List,
        OpKind::Multi,
    ];

    pub fn name(self) -> &'static str {
        match self {
            OpKind::Create => "create",
            OpKind::Delete => "delete",
            OpKind::Set => "set",
            OpKind::Get => "get",
            OpKind::Exists => "exists",
            OpKind::List => "list",
            OpKind::Multi => "multi",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Counts of one part of a run. Histograms are made on first use, so a kind of request the
/// workload never sends costs nothing.
#[derive(Debug, Default)]
pub struct Stats {
    /// Latency of the requests that succeeded, per kind.
    latency_us: [Option<Histogram<u64>>; OpKind::ALL.len()],
    errors: [u64; OpKind::ALL.len()],
    errors_by_code: BTreeMap<String, u64>,
    watch_events: u64,
}

/// Figures of one row of the report: one kind of request, or all of them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub ok: u64,
    pub errors: u64,
    /// Of the requests that succeeded.
    pub latency_us: Latency,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Latency {
    pub avg: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

impl Stats {
    pub fn record_ok(&mut self, kind: OpKind, latency: Duration) {
        let us = u64::try_from(latency.as_micros())
            .unwrap_or(u64::MAX)
            .clamp(1, LATENCY_US_MAX);
        let histogram = self.latency_us[kind.index()].get_or_insert_with(new_histogram);
        histogram.saturating_record(us);
    }

    pub fn record_error(&mut self, kind: OpKind, code: &str) {
        self.errors[kind.index()] += 1;
        *self.errors_by_code.entry(code.to_string()).or_default() += 1;
    }

    pub fn record_watch_event(&mut self) {
        self.watch_events += 1;
    }

    pub fn merge(&mut self, other: &Stats) {
        for (mine, theirs) in self.latency_us.iter_mut().zip(&other.latency_us) {
            if let Some(theirs) = theirs {
                let mine = mine.get_or_insert_with(new_histogram);
                mine.add(theirs)
                    .expect("histograms of the same bounds always merge");
            }
        }
        for (mine, theirs) in self.errors.iter_mut().zip(other.errors) {
            *mine += theirs;
        }
        for (code, count) in &other.errors_by_code {
            *self.errors_by_code.entry(code.clone()).or_default() += count;
        }
        self.watch_events += other.watch_events;
    }

    /// The row for one kind, or `None` if the run sent no request of that kind.
    pub fn summary(&self, kind: OpKind) -> Option<Summary> {
        let histogram = self.latency_us[kind.index()].as_ref();
        let errors = self.errors[kind.index()];
        if histogram.is_none() && errors == 0 {
            return None;
        }
        Some(summarize(histogram, errors))
    }

    pub fn total(&self) -> Summary {
        let mut all = new_histogram();
        for histogram in self.latency_us.iter().flatten() {
            all.add(histogram)
                .expect("histograms of the same bounds always merge");
        }
        summarize(Some(&all), self.errors.iter().sum())
    }

    pub fn errors_by_code(&self) -> &BTreeMap<String, u64> {
        &self.errors_by_code
    }

    pub fn watch_events(&self) -> u64 {
        self.watch_events
    }
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_US_MAX, LATENCY_SIGNIFICANT_DIGITS)
        .expect("the latency bounds are valid for hdrhistogram")
}

fn summarize(histogram: Option<&Histogram<u64>>, errors: u64) -> Summary {
    let Some(h) = histogram.filter(|h| !h.is_empty()) else {
        let latency_us = Latency {
            avg: 0.0,
            p50: 0,
            p90: 0,
            p99: 0,
            p999: 0,
            max: 0,
        };
        return Summary {
            ok: 0,
            errors,
            latency_us,
        };
    };
    let latency_us = Latency {
        avg: h.mean(),
        p50: h.value_at_quantile(0.50),
        p90: h.value_at_quantile(0.90),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
    };
    Summary {
        ok: h.len(),
        errors,
        latency_us,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut stats = Stats::default();
        for n in 1..=1000 {
            stats.record_ok(OpKind::Get, us(n));
        }
        let get = stats.summary(OpKind::Get).unwrap();
        // Below 2048 us a 3-digit histogram is exact to the microsecond.
        let expected = Latency {
            avg: 500.5,
            p50: 500,
            p90: 900,
            p99: 990,
            p999: 999,
            max: 1000,
        };
        assert_eq!(
            get,
            Summary {
                ok: 1000,
                errors: 0,
                latency_us: expected
            }
        );
    }

    #[test]
    fn a_tail_shows_in_p99_9_and_max_only() {
        let mut stats = Stats::default();
        // 0.2% of requests are slow: beyond p99, within p99.9.
        for _ in 0..9980 {
            stats.record_ok(OpKind::Set, us(100));
        }
        for _ in 0..20 {
            stats.record_ok(OpKind::Set, us(50_000));
        }
        let set = stats.summary(OpKind::Set).unwrap().latency_us;
        assert_eq!((set.p50, set.p90, set.p99), (100, 100, 100));
        // 50 ms lands in a bucket 32 us wide: within 0.1%.
        assert!(set.p999.abs_diff(50_000) <= 50, "{set:?}");
        assert!(set.max.abs_diff(50_000) <= 50, "{set:?}");
    }

    #[test]
    fn extremes_are_clamped_not_lost() {
        let mut stats = Stats::default();
        stats.record_ok(OpKind::Create, Duration::ZERO);
        stats.record_ok(OpKind::Create, Duration::from_secs(3600));
        let create = stats.summary(OpKind::Create).unwrap();
        assert_eq!(create.ok, 2);
        assert_eq!(create.latency_us.p50, 1);
        assert!(create.latency_us.max >= LATENCY_US_MAX, "{create:?}");
    }

    #[test]
    fn kinds_never_sent_have_no_row() {
        let mut stats = Stats::default();
        stats.record_ok(OpKind::Get, us(10));
        stats.record_error(OpKind::Delete, "NoNode");
        assert!(stats.summary(OpKind::Multi).is_none());
        let delete = stats.summary(OpKind::Delete).unwrap();
        assert_eq!((delete.ok, delete.errors, delete.latency_us.max), (0, 1, 0));
    }

    #[test]
    fn merging_adds_counts_errors_and_events() {
        let mut a = Stats::default();
        let mut b = Stats::default();
        a.record_ok(OpKind::Get, us(10));
        a.record_error(OpKind::Get, "ConnectionLoss");
        b.record_ok(OpKind::Get, us(30));
        b.record_ok(OpKind::List, us(20));
        b.record_error(OpKind::Set, "ConnectionLoss");
        b.record_error(OpKind::Set, "BadVersion");
        b.record_watch_event();
        a.merge(&b);
        assert_eq!(a.summary(OpKind::Get).unwrap().ok, 2);
        assert_eq!(a.summary(OpKind::Get).unwrap().latency_us.max, 30);
        let total = a.total();
        assert_eq!((total.ok, total.errors), (3, 3));
        assert_eq!(total.latency_us.avg, 20.0);
        let codes: Vec<(&str, u64)> = a
            .errors_by_code()
            .iter()
            .map(|(c, n)| (c.as_str(), *n))
            .collect();
        assert_eq!(codes, [("BadVersion", 1), ("ConnectionLoss", 2)]);
        assert_eq!(a.watch_events(), 1);
    }

    #[test]
    fn an_empty_run_totals_to_zero() {
        let total = Stats::default().total();
        assert_eq!((total.ok, total.errors, total.latency_us.p99), (0, 0, 0));
    }
}
