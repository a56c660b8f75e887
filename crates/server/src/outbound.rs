//! A connection's outbound queue: every reply and event for one client goes through it, in the
//! order it was queued. Bounded in bytes: a client that does not read its answers is cut off
//! rather than let the server's memory grow. The tasks that drain the queues run on a runtime
//! of their own ([`writers`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use tokio::runtime::{Handle, Runtime};
use tokio::sync::{Notify, mpsc};

/// The runtime every connection's writer task runs on: threads of their own (`warden-writer`,
/// half as many as the process may use, at least one), apart from the runtime that reads
/// requests, runs Raft and applies; one for the whole process.
///
/// Why: the apply queues the replies of a whole batch of writes at once, waking as many
/// writer tasks. On the connections' runtime those wakes went to the back of a run queue that
/// held every busy connection: with 1,000 sessions a write's reply waited there a median 39 ms
/// after it was queued, while a read's reply, woken by its own connection and so run next, left
/// at once (docs/benchmarks.md, "Replies on threads of their own"). Here a writer waits only
/// behind other writers.
///
/// It has no IO or timer driver of its own: a writer's socket stays registered with the
/// driver of the runtime that accepted it, which wakes the writer when the socket can take
/// more. So a writer must not sleep or time out (it never needs to).
pub fn writers() -> Handle {
    static WRITERS: OnceLock<Option<Runtime>> = OnceLock::new();
    let runtime = WRITERS.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().div_ceil(2));
        match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("warden-writer")
            .build()
        {
            Ok(runtime) => Some(runtime),
            Err(error) => {
                tracing::warn!(
                    %error,
                    "no threads of their own for the connections' writers: they share the \
                     connections' runtime"
                );
                None
            }
        }
    });
    runtime
        .as_ref()
        .map_or_else(Handle::current, |runtime| runtime.handle().clone())
}

/// What the writer task is asked to do.
#[derive(Debug)]
pub enum Out {
    /// Send this payload with its length prefix.
    Frame(Vec<u8>),
    /// Send what is queued before this, then close the connection.
    Close,
}

/// The sending side, held by whoever answers the client.
#[derive(Debug, Clone)]
pub struct Outbound {
    tx: mpsc::UnboundedSender<Out>,
    queued_bytes: Arc<AtomicU64>,
    overflowed: Arc<AtomicBool>,
    cut_off: Arc<Notify>,
    queued_bytes_max: u64,
}

/// The receiving side, held by the connection's writer task.
#[derive(Debug)]
pub struct OutboundQueue {
    rx: mpsc::UnboundedReceiver<Out>,
    queued_bytes: Arc<AtomicU64>,
    /// Signalled once, when the byte bound is passed.
    cut_off: Arc<Notify>,
}

pub fn channel(queued_bytes_max: u64) -> (Outbound, OutboundQueue) {
    let (tx, rx) = mpsc::unbounded_channel();
    let queued_bytes = Arc::new(AtomicU64::new(0));
    let cut_off = Arc::new(Notify::new());
    (
        Outbound {
            tx,
            queued_bytes: queued_bytes.clone(),
            overflowed: Arc::new(AtomicBool::new(false)),
            cut_off: cut_off.clone(),
            queued_bytes_max,
        },
        OutboundQueue {
            rx,
            queued_bytes,
            cut_off,
        },
    )
}

impl Outbound {
    /// Queues one frame. Past the byte bound the frame is dropped and the connection closed
    /// at once, what is queued unsent: the client can no longer be given a gap-free stream,
    /// and a client that does not read would never let the queue drain to a close behind it.
    pub fn send(&self, payload: Vec<u8>) {
        if self.overflowed.load(Ordering::Relaxed) {
            return;
        }
        let len = payload.len() as u64;
        let queued = self.queued_bytes.fetch_add(len, Ordering::Relaxed) + len;
        if queued > self.queued_bytes_max {
            self.queued_bytes.fetch_sub(len, Ordering::Relaxed);
            if !self.overflowed.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    queued,
                    limit = self.queued_bytes_max,
                    "closing a connection whose client does not read its answers \
                     (limits.outbound_queue_bytes_per_session_max)"
                );
                // notify_one keeps the signal for a writer that is not waiting on it yet.
                self.cut_off.notify_one();
            }
            return;
        }
        if self.tx.send(Out::Frame(payload)).is_err() {
            self.queued_bytes.fetch_sub(len, Ordering::Relaxed);
        }
    }

    /// Closes the connection once everything queued so far is sent.
    pub fn close(&self) {
        let _ = self.tx.send(Out::Close);
    }
}

impl OutboundQueue {
    /// The next item, waiting for one; `None` once every sender is gone.
    pub async fn recv(&mut self) -> Option<Out> {
        self.rx.recv().await
    }

    /// The next item if one is already queued.
    pub fn try_recv(&mut self) -> Option<Out> {
        self.rx.try_recv().ok()
    }

    /// Resolves once the client has been cut off (the byte bound was passed). Borrows
    /// nothing, so that the writer can wait for it while it receives and sends.
    pub fn cut_off(&self) -> impl Future<Output = ()> + Send + use<> {
        let cut_off = self.cut_off.clone();
        async move { cut_off.notified().await }
    }

    /// Marks `n` queued bytes as written.
    pub fn sent(&self, n: usize) {
        self.queued_bytes.fetch_sub(n as u64, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn past_the_bound_the_connection_is_cut_off_and_nothing_more_queued() {
        let (out, mut q) = channel(10);
        out.send(vec![0; 6]);
        out.send(vec![0; 6]);
        out.send(vec![0; 1]);
        // Signalled before the writer waits for it: the signal is kept.
        tokio::time::timeout(std::time::Duration::from_secs(5), q.cut_off())
            .await
            .expect("cut off");
        assert!(matches!(q.try_recv(), Some(Out::Frame(f)) if f.len() == 6));
        assert!(q.try_recv().is_none());
    }
}
