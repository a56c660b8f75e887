//! Counters the four-letter words and metrics report: per server (lock-free, updated on every
//! reply) and per client (kept with the client under the replica's lock).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// Request latency, as ZooKeeper's `srvr` reports it: min/avg/max in milliseconds.
#[derive(Debug)]
pub struct Latency {
    min_us: AtomicU64,
    max_us: AtomicU64,
    total_us: AtomicU64,
    count: AtomicU64,
}

impl Default for Latency {
    fn default() -> Self {
        Latency {
            min_us: AtomicU64::new(u64::MAX),
            max_us: AtomicU64::new(0),
            total_us: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }
}

impl Latency {
    pub fn record(&self, d: Duration) {
        let us = d.as_micros() as u64;
        self.min_us.fetch_min(us, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
        self.total_us.fetch_add(us, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// (min, avg, max) in milliseconds; all 0 before the first request.
    pub fn min_avg_max_ms(&self) -> (f64, f64, f64) {
        let count = self.count.load(Ordering::Relaxed);
        if count == 0 {
            return (0.0, 0.0, 0.0);
        }
        let ms = |us: u64| us as f64 / 1000.0;
        (
            ms(self.min_us.load(Ordering::Relaxed)),
            ms(self.total_us.load(Ordering::Relaxed)) / count as f64,
            ms(self.max_us.load(Ordering::Relaxed)),
        )
    }

    pub fn reset(&self) {
        self.min_us.store(u64::MAX, Ordering::Relaxed);
        self.max_us.store(0, Ordering::Relaxed);
        self.total_us.store(0, Ordering::Relaxed);
        self.count.store(0, Ordering::Relaxed);
    }
}

/// Server-wide counters.
#[derive(Debug, Default)]
pub struct ServerStats {
    pub packets_received: AtomicU64,
    pub packets_sent: AtomicU64,
    pub latency: Latency,
}

impl ServerStats {
    pub fn received(&self) {
        self.packets_received.fetch_add(1, Ordering::Relaxed);
    }

    pub fn sent(&self, latency: Duration) {
        self.packets_sent.fetch_add(1, Ordering::Relaxed);
        self.latency.record(latency);
    }

    /// `srst`: counters back to zero.
    pub fn reset(&self) {
        self.packets_received.store(0, Ordering::Relaxed);
        self.packets_sent.store(0, Ordering::Relaxed);
        self.latency.reset();
    }
}

/// One client's counters, for `cons`.
#[derive(Debug, Clone)]
pub struct ClientStats {
    pub established: SystemTime,
    pub received: u64,
    pub sent: u64,
    pub min_latency: Duration,
    pub max_latency: Duration,
    pub total_latency: Duration,
    pub answered: u64,
    pub last_zxid: i64,
    pub last_op: i32,
    pub last_response: Option<Instant>,
}

impl Default for ClientStats {
    fn default() -> Self {
        Self::new()
    }
}

impl ClientStats {
    pub fn new() -> ClientStats {
        ClientStats {
            established: SystemTime::now(),
            received: 0,
            sent: 0,
            min_latency: Duration::MAX,
            max_latency: Duration::ZERO,
            total_latency: Duration::ZERO,
            answered: 0,
            last_zxid: -1,
            last_op: -1,
            last_response: None,
        }
    }

    pub fn received(&mut self) {
        self.received += 1;
    }

    /// A reply went out after `latency`, carrying `zxid`, to an operation `op` (0 if unknown).
    pub fn sent(&mut self, latency: Duration, zxid: i64, op: i32) {
        self.sent += 1;
        self.answered += 1;
        self.min_latency = self.min_latency.min(latency);
        self.max_latency = self.max_latency.max(latency);
        self.total_latency += latency;
        self.last_zxid = zxid;
        self.last_op = op;
        self.last_response = Some(Instant::now());
    }

    /// Fastest reply in milliseconds; 0 before the first.
    pub fn min_latency_ms(&self) -> u64 {
        if self.answered == 0 {
            0
        } else {
            self.min_latency.as_millis() as u64
        }
    }

    /// Average reply time in milliseconds; 0 before the first.
    pub fn avg_latency_ms(&self) -> u64 {
        if self.answered == 0 {
            0
        } else {
            (self.total_latency / self.answered as u32).as_millis() as u64
        }
    }

    /// `crst`: counters back to zero.
    pub fn reset(&mut self) {
        let established = self.established;
        *self = ClientStats::new();
        self.established = established;
    }
}
