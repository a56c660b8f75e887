//! The rate at which new sessions and resumed ones are let in (ZooKeeper's connection
//! throttle, `zookeeper.connection_throttle_*`): a token bucket of `tokens`, refilled with
//! `fill_count` tokens every `fill_time_ms`; a handshake takes one token, or, with weights,
//! `global_session_weight` for a new session and `renew_session_weight` for a resumed one. A
//! handshake that finds too few is refused and its connection closed (ZooKeeper's
//! `ClientCnxnLimitException`), counted in `connection_rejected`; its client tries another
//! server or again after its back-off. `tokens = 0` (the default) lets every handshake in.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The throttle's settings (`[limits.connection_throttle]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConnectionThrottle {
    /// The bucket's size, in new-session handshakes; 0: no throttle
    /// (`connection_throttle_tokens`).
    pub tokens: u32,
    /// Milliseconds between refills (`connection_throttle_fill_time`).
    pub fill_time_ms: u32,
    /// Tokens added at each refill (`connection_throttle_fill_count`).
    pub fill_count: u32,
    /// Whether a new session costs `global_session_weight` tokens and a resumed one
    /// `renew_session_weight` (the bucket and the refill scaled by the former), rather than one
    /// each (`connection_throttle_weight_enabled`).
    pub weight_enabled: bool,
    /// `connection_throttle_global_session_weight`.
    pub global_session_weight: u32,
    /// `connection_throttle_renew_session_weight`.
    pub renew_session_weight: u32,
}

impl Default for ConnectionThrottle {
    fn default() -> Self {
        ConnectionThrottle {
            tokens: 0,
            fill_time_ms: 1,
            fill_count: 1,
            weight_enabled: false,
            global_session_weight: 3,
            renew_session_weight: 2,
        }
    }
}

impl ConnectionThrottle {
    pub(crate) fn validate(&self) -> Result<(), crate::config::InvalidConfig> {
        if self.tokens > 0 && (self.fill_time_ms == 0 || self.global_session_weight == 0) {
            return Err(crate::config::InvalidConfig(
                "limits.connection_throttle: fill_time_ms and global_session_weight must be at \
                 least 1"
                    .into(),
            ));
        }
        Ok(())
    }

    fn scale(&self) -> u64 {
        if self.weight_enabled {
            self.global_session_weight.into()
        } else {
            1
        }
    }
}

/// The bucket.
#[derive(Debug)]
pub struct Throttle {
    settings: ConnectionThrottle,
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: u64,
    refilled: Instant,
}

impl Throttle {
    pub fn new(settings: &ConnectionThrottle) -> Throttle {
        Throttle {
            settings: settings.clone(),
            bucket: Mutex::new(Bucket {
                tokens: u64::from(settings.tokens) * settings.scale(),
                refilled: Instant::now(),
            }),
        }
    }

    /// Whether a handshake (`resumed`: of a known session) may go on, its tokens taken if so.
    pub fn admit(&self, resumed: bool) -> bool {
        self.admit_at(resumed, Instant::now())
    }

    fn admit_at(&self, resumed: bool, now: Instant) -> bool {
        let s = &self.settings;
        if s.tokens == 0 {
            return true;
        }
        let need = match (s.weight_enabled, resumed) {
            (false, _) => 1,
            (true, false) => u64::from(s.global_session_weight),
            (true, true) => u64::from(s.renew_session_weight),
        };
        let max = u64::from(s.tokens) * s.scale();
        let fill_time = Duration::from_millis(s.fill_time_ms.into());
        let mut b = self.bucket.lock().expect("throttle lock poisoned");
        let elapsed = now.saturating_duration_since(b.refilled);
        if elapsed >= fill_time {
            // Whole refills only, the rest of the time kept for the next one.
            let refills = (elapsed.as_nanos() / fill_time.as_nanos()) as u64;
            let added = refills.saturating_mul(u64::from(s.fill_count) * s.scale());
            b.tokens = b.tokens.saturating_add(added).min(max);
            b.refilled += fill_time * refills.min(u64::from(u32::MAX)) as u32;
        }
        if b.tokens < need {
            return false;
        }
        b.tokens -= need;
        true
    }
}

/// Lets a log line about refused connections through at most once a second, so that a flood
/// of them does not flood the log as well (they are all counted).
#[derive(Default)]
pub struct Occasionally(Mutex<Option<Instant>>);

impl Occasionally {
    pub const fn new() -> Occasionally {
        Occasionally(Mutex::new(None))
    }

    pub fn allows(&self, now: Instant) -> bool {
        let mut last = self.0.lock().expect("log gate lock poisoned");
        match *last {
            Some(at) if now.saturating_duration_since(at) < Duration::from_secs(1) => false,
            _ => {
                *last = Some(now);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn throttle(tokens: u32, fill_time_ms: u32, fill_count: u32) -> Throttle {
        Throttle::new(&ConnectionThrottle {
            tokens,
            fill_time_ms,
            fill_count,
            ..ConnectionThrottle::default()
        })
    }

    #[test]
    fn log_lines_at_most_once_a_second() {
        let gate = Occasionally::new();
        let now = Instant::now();
        assert!(gate.allows(now));
        assert!(!gate.allows(now + Duration::from_millis(999)));
        assert!(gate.allows(now + Duration::from_millis(1000)));
    }

    #[test]
    fn off_by_default() {
        let t = Throttle::new(&ConnectionThrottle::default());
        assert!((0..10_000).all(|_| t.admit(false)));
    }

    #[test]
    fn a_burst_of_the_bucket_then_the_refill_rate() {
        let t = throttle(5, 100, 2);
        let start = Instant::now();
        assert!((0..5).all(|_| t.admit_at(false, start)));
        assert!(!t.admit_at(false, start));
        // Less than a refill later: still nothing.
        assert!(!t.admit_at(true, start + Duration::from_millis(99)));
        // One refill: two more.
        let later = start + Duration::from_millis(150);
        assert!(t.admit_at(false, later) && t.admit_at(false, later));
        assert!(!t.admit_at(false, later));
        // The 50 ms left over count towards the next refill; a long pause fills the bucket
        // only to its size.
        assert!(t.admit_at(false, start + Duration::from_millis(200)));
        let much_later = start + Duration::from_secs(60);
        assert_eq!((0..10).filter(|_| t.admit_at(false, much_later)).count(), 5);
    }

    #[test]
    fn weights_make_a_new_session_dearer_than_a_resumed_one() {
        let t = Throttle::new(&ConnectionThrottle {
            tokens: 2,
            fill_time_ms: 1000,
            weight_enabled: true,
            ..ConnectionThrottle::default()
        });
        // A bucket of 2 × 3 = 6: a new session (3) and a resumed one (2), then no new one.
        let now = Instant::now();
        assert!(t.admit_at(false, now));
        assert!(t.admit_at(true, now));
        assert!(!t.admit_at(false, now));
    }
}
