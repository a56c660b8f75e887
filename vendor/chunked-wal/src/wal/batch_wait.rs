//! How long the flush worker waits for more writes to join a batch (patched in
//! for Warden, see PATCHED.md).

use std::time::Duration;

/// Recent batches holding this many synced writes on average wait the whole
/// `flush_batch_wait`; smaller ones wait in proportion.
const FULL_WAIT_SYNC_WRITES: f64 = 32.0;

/// Weight of the newest batch in the running average.
const NEWEST_WEIGHT: f64 = 0.25;

/// The wait before a batch is written.
///
/// A fixed wait costs every write its whole length when writers are few, and
/// none of them would have joined the batch anyway: one writer waiting for its
/// reply sends nothing more. When writers are many, the wait gathers more
/// writes per fsync. The adaptive wait follows how many synced writes recent
/// batches held: about one each, no wait; more, a longer one.
#[derive(Debug, Clone)]
pub(crate) enum BatchWait {
    Fixed(Duration),
    Adaptive {
        max: Duration,
        /// Synced writes per batch, averaged over recent batches that held any.
        recent_sync_writes: f64,
    },
}

impl BatchWait {
    pub(crate) fn new(max: Duration, adaptive: bool) -> Self {
        if adaptive {
            BatchWait::Adaptive {
                max,
                recent_sync_writes: 1.0,
            }
        } else {
            BatchWait::Fixed(max)
        }
    }

    /// How long the next batch waits for more writes after its first.
    pub(crate) fn wait(&self) -> Duration {
        match *self {
            BatchWait::Fixed(wait) => wait,
            BatchWait::Adaptive {
                max,
                recent_sync_writes,
            } => {
                if recent_sync_writes < 2.0 {
                    Duration::ZERO
                } else {
                    max.mul_f64(
                        recent_sync_writes.min(FULL_WAIT_SYNC_WRITES)
                            / FULL_WAIT_SYNC_WRITES,
                    )
                }
            }
        }
    }

    /// Whether writes already queued join a batch after its wait is over.
    pub(crate) fn takes_queued(&self) -> bool {
        matches!(self, BatchWait::Adaptive { .. })
    }

    /// Records how many synced writes a batch held. A batch of none (a write
    /// that only moves the committed mark, say) says nothing of the writers.
    pub(crate) fn record(&mut self, sync_writes: usize) {
        if let BatchWait::Adaptive {
            recent_sync_writes, ..
        } = self
            && sync_writes > 0
        {
            *recent_sync_writes +=
                (sync_writes as f64 - *recent_sync_writes) * NEWEST_WEIGHT;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::BatchWait;

    const MAX: Duration = Duration::from_micros(100);

    #[test]
    fn test_fixed_wait_ignores_batches() {
        let mut wait = BatchWait::new(MAX, false);
        wait.record(100);
        assert_eq!(MAX, wait.wait());
        assert!(!wait.takes_queued());
    }

    #[test]
    fn test_adaptive_wait_is_none_for_lone_writes() {
        let mut wait = BatchWait::new(MAX, true);
        assert_eq!(Duration::ZERO, wait.wait());
        for _ in 0..10 {
            wait.record(1);
        }
        assert_eq!(Duration::ZERO, wait.wait());
        assert!(wait.takes_queued());
    }

    #[test]
    fn test_adaptive_wait_grows_with_batches_and_falls_back() {
        let mut wait = BatchWait::new(MAX, true);
        for _ in 0..40 {
            wait.record(16);
        }
        let half = wait.wait();
        assert!(half > MAX / 3 && half <= MAX / 2, "{:?}", half);

        for _ in 0..40 {
            wait.record(500);
        }
        assert_eq!(MAX, wait.wait());

        // Batches without a synced write do not count.
        wait.record(0);
        assert_eq!(MAX, wait.wait());

        for _ in 0..40 {
            wait.record(1);
        }
        assert_eq!(Duration::ZERO, wait.wait());
    }
}
