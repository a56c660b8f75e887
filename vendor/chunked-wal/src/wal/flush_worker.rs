use std::fs::File;
use std::io;
use std::io::IoSlice;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::os::unix::fs::MetadataExt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::Condvar;
use std::sync::Mutex;
use std::sync::mpsc::Receiver;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::mpsc::TryRecvError;
use std::thread::JoinHandle;
use std::time::Duration;
use std::time::Instant;

use log::debug;
use log::info;

use crate::Config;
use crate::WalTypes;
use crate::wal::atomic_flush_metrics::AtomicFlushMetrics;
use crate::wal::batch_metrics::BatchMetrics;
use crate::wal::batch_wait::BatchWait;
use crate::wal::callback::Callback;
use crate::wal::file_entry::FileEntry;
use crate::wal::file_persisted::ChunkPersisted;
use crate::wal::flush_request::FlushStat;
use crate::wal::flush_request::SeqRequest;
use crate::wal::flush_request::WorkerRequest;
use crate::wal::queued_bytes::QueuedBytes;
use crate::wal::queued_write::QueuedWrite;
use crate::wal::write_batch::WriteBatch;

#[derive(Debug)]
pub(crate) enum WorkerStatus {
    Running,
    Failed(io::Error),
}

#[derive(Debug)]
struct WorkerProgress {
    done_seq: u64,
    status: WorkerStatus,
}

/// Flow control shared by the WAL and its flush worker.
///
/// The WAL waits here for completion and failure reports, and for queued
/// write memory to be freed.
#[derive(Debug)]
pub(crate) struct WorkerState {
    progress: Mutex<WorkerProgress>,
    changed: Condvar,
    queued_bytes: QueuedBytes,
}

impl WorkerState {
    pub(crate) fn new(queue_max_bytes: usize) -> Self {
        Self {
            progress: Mutex::new(WorkerProgress {
                done_seq: 0,
                status: WorkerStatus::Running,
            }),
            changed: Condvar::new(),
            queued_bytes: QueuedBytes::new(queue_max_bytes),
        }
    }

    pub(crate) fn queued_bytes(&self) -> &QueuedBytes {
        &self.queued_bytes
    }

    pub(crate) fn done_seq(&self) -> u64 {
        self.progress.lock().unwrap().done_seq
    }

    pub(crate) fn complete(&self, seq: u64) {
        let mut progress = self.progress.lock().unwrap();
        progress.done_seq = progress.done_seq.max(seq);
        self.changed.notify_all();
    }

    pub(crate) fn fail(&self, err: io::Error) {
        let mut progress = self.progress.lock().unwrap();
        progress.status = WorkerStatus::Failed(err);
        self.changed.notify_all();
    }

    pub(crate) fn wait_for(&self, target_seq: u64) -> Result<(), io::Error> {
        let mut progress = self.progress.lock().unwrap();
        loop {
            if progress.done_seq >= target_seq {
                return Ok(());
            }

            status_error(&progress.status)?;
            progress = self.changed.wait(progress).unwrap();
        }
    }
}

fn status_error(status: &WorkerStatus) -> Result<(), io::Error> {
    match status {
        WorkerStatus::Running => Ok(()),
        WorkerStatus::Failed(err) => {
            Err(io::Error::new(err.kind(), err.to_string()))
        }
    }
}

pub(crate) struct FlushWorker<W>
where W: WalTypes
{
    rx: Receiver<SeqRequest<W>>,
    files: Vec<FileEntry<W>>,
    metrics: Arc<AtomicFlushMetrics>,
    config: Arc<Config>,
    worker_state: Arc<WorkerState>,
    batch_wait: BatchWait,
    /// Small records gathered for one positional write (`write_batch_at`).
    gathered: Vec<u8>,
}

impl<W> FlushWorker<W>
where W: WalTypes
{
    /// When starting, there is at most one open chunk file that is not sync.
    pub(crate) fn spawn(self) -> JoinHandle<()> {
        std::thread::Builder::new()
            .name("chunked_wal_flush_worker".to_string())
            .spawn(move || {
                self.run();
            })
            .expect("Failed to start sync worker thread")
    }

    pub(crate) fn new(
        rx: Receiver<SeqRequest<W>>,
        file_entry: FileEntry<W>,
        worker_state: Arc<WorkerState>,
        metrics: Arc<AtomicFlushMetrics>,
        config: Arc<Config>,
    ) -> Self {
        let batch_wait = BatchWait::new(
            config.flush_batch_wait(),
            config.flush_batch_wait_adaptive(),
        );
        Self {
            rx,
            files: vec![file_entry],
            metrics,
            config,
            worker_state,
            batch_wait,
            gathered: Vec::new(),
        }
    }

    /// Runs the worker and records any failure in the shared worker state.
    ///
    /// User code runs on this thread through the write and chunk-persisted
    /// callbacks. Catching its panics keeps a panicking callback from
    /// unwinding the thread silently, which would leave every
    /// `wait_worker_idle` caller blocked forever.
    fn run(mut self) {
        let res =
            std::panic::catch_unwind(AssertUnwindSafe(|| self.run_inner()));

        // A stopped worker never frees queued write memory again. Release it
        // so a sender blocked on the byte limit wakes and sees the closed
        // channel instead of waiting forever.
        self.worker_state.queued_bytes().release_all();

        let err = match res {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e,
            Err(payload) => io::Error::other(format!(
                "FlushWorker panicked: {}",
                panic_message(payload.as_ref())
            )),
        };

        log::error!("FlushWorker failed: {}", err);
        self.worker_state.fail(err);
    }

    fn run_inner(&mut self) -> Result<(), io::Error> {
        // Write requests should be batched to maximize throughput. One batch
        // serves every iteration so its write vector is allocated once.
        let mut batch = WriteBatch::new(self.config.flush_batch_max_items());

        loop {
            batch.reset();

            let req = self.rx.recv();
            let Ok(seq_req) = req else {
                log::info!("FlushWorker input channel closed, quit");
                return Ok(());
            };

            if !batch.push_seq_request(seq_req) {
                let Some(SeqRequest { seq, req, .. }) =
                    batch.last_non_flush.take()
                else {
                    unreachable!("non-write request must be stored");
                };
                self.handle_non_flush_request(req)?;
                self.worker_state.complete(seq);
                continue;
            }

            let group_wait = self.collect_write_batch(&mut batch);

            debug!("batched write: {}", batch.writes.len());

            let batch_bytes: usize =
                batch.writes.iter().map(|w| w.write.data.len()).sum();

            let sync_result = {
                // TODO: possible to use write_all_vectored()?

                let mut last_file: &File = &self.files.last().unwrap().f;
                let batch_start = Instant::now();
                let mut batch_metrics =
                    BatchMetrics::new(batch.writes.len(), group_wait);
                for w in &batch.writes {
                    batch_metrics.record_queued_write(batch_start, w);
                }

                let write_start = Instant::now();
                let write_res = if self.config.preallocate_chunks() {
                    let file = self.files.last().unwrap();
                    write_batch_at(
                        &file.f,
                        file.starting_offset,
                        &batch.writes,
                        &mut self.gathered,
                    )
                } else {
                    write_batch_vectored(&mut last_file, &batch.writes)
                };
                batch_metrics.record_write_time(write_start);

                let need_sync = batch.writes.iter().any(|w| w.write.sync);

                let sync_result = match write_res {
                    Ok(()) if need_sync => {
                        let upto_offset =
                            batch.writes.last().unwrap().write.upto_offset;
                        let sync_start = Instant::now();
                        let res = self.sync_data_files(upto_offset);
                        batch_metrics.record_sync_time(sync_start);
                        if let Err(ref e) = res {
                            log::error!(
                                "Failed to flush upto offset {}: {}",
                                upto_offset,
                                e
                            );
                        }
                        res
                    }
                    Ok(()) => Ok(()),
                    Err(e) => Err(e),
                };

                batch_metrics.record_batch_time(batch_start);
                self.metrics.record_batch(batch_metrics);

                sync_result
            };

            let mut max_seq = batch.max_seq;
            let last_non_flush = batch.last_non_flush.take();

            for w in batch.writes.drain(..) {
                if let Some(cb) = w.write.callback {
                    match &sync_result {
                        Ok(()) => cb.send(Ok(())),
                        Err(e) => {
                            cb.send(Err(io::Error::new(
                                e.kind(),
                                e.to_string(),
                            )));
                        }
                    }
                }
            }

            self.worker_state.queued_bytes().release(batch_bytes);

            sync_result?;

            // Handle the last non-flush request
            if let Some(SeqRequest {
                seq: nf_seq,
                req: last,
                ..
            }) = last_non_flush
            {
                self.handle_non_flush_request(last)?;
                max_seq = max_seq.max(nf_seq);
            }

            self.worker_state.complete(max_seq);
        }
    }

    fn collect_write_batch(&mut self, batch: &mut WriteBatch<W>) -> Duration {
        let loop_started_at = Instant::now();
        let loop_deadline = loop_started_at + self.batch_wait.wait();

        while batch.last_non_flush.is_none()
            && batch.writes.len() < batch.max_size
        {
            let now = Instant::now();
            let received = if now < loop_deadline {
                match self.rx.recv_timeout(loop_deadline - now) {
                    Ok(seq_req) => seq_req,
                    Err(
                        RecvTimeoutError::Timeout
                        | RecvTimeoutError::Disconnected,
                    ) => break,
                }
            } else if self.batch_wait.takes_queued() {
                match self.rx.try_recv() {
                    Ok(seq_req) => seq_req,
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => {
                        break;
                    }
                }
            } else {
                break;
            };
            if !batch.push_seq_request(received) {
                break;
            }
        }

        self.batch_wait
            .record(batch.writes.iter().filter(|w| w.write.sync).count());
        loop_started_at.elapsed()
    }

    fn handle_non_flush_request(
        &mut self,
        req: WorkerRequest<W>,
    ) -> Result<(), io::Error> {
        match req {
            WorkerRequest::AppendFile(file_entry) => {
                info!("FlushWorker: AppendFile: {}", file_entry);
                if self.config.preallocate_chunks()
                    && let Some(closed) = self.files.last()
                {
                    cut_to_records(closed, file_entry.starting_offset)?;
                }
                self.files.push(file_entry);
            }
            WorkerRequest::Write(_) => {
                unreachable!("Write request should be handled in run()");
            }
            WorkerRequest::GetFlushStat { tx } => {
                let stat = self
                    .files
                    .iter()
                    .map(|f| {
                        Ok(FlushStat {
                            starting_offset: f.starting_offset,
                            sync_id: f.sync_id,
                            ino: f.f.metadata()?.ino(),
                        })
                    })
                    .collect::<Result<Vec<_>, io::Error>>()?;
                let _ = tx.send(stat);
            }
            WorkerRequest::RemoveChunks { chunk_paths } => {
                info!("FlushWorker: RemoveChunks: {:?}", chunk_paths);
                let removed_any = !chunk_paths.is_empty();
                for path in chunk_paths {
                    std::fs::remove_file(path)?;
                }
                if removed_any {
                    // Commit the unlinks so a removed chunk cannot reappear
                    // after power loss.
                    self.config.sync_dir()?;
                }
            }
        }

        Ok(())
    }

    pub fn sync_data_files(&mut self, offset: u64) -> Result<(), io::Error> {
        let files = &mut self.files;

        if files.is_empty() {
            return Ok(());
        }

        // Append-only WAL flushes only need file data durability. Metadata
        // changes such as recovery truncation are synchronized at the call
        // site that performs the metadata update.
        while files.len() > 1 {
            let f = files.remove(0);
            f.f.sync_data()?;
        }

        let f = &mut files[0];
        f.f.sync_data()?;
        f.on_persisted.call(ChunkPersisted {
            starting_offset: f.starting_offset,
            synced_offset: offset,
        });
        f.sync_id = offset;

        Ok(())
    }
}

/// Renders a caught panic payload as text.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(message) = payload.downcast_ref::<&str>() {
        return (*message).to_string();
    }

    if let Some(message) = payload.downcast_ref::<String>() {
        return message.clone();
    }

    "unknown panic payload".to_string()
}

fn write_batch_vectored<W>(
    file: &mut &File,
    writes: &[QueuedWrite<W>],
) -> Result<(), io::Error>
where
    W: WalTypes,
{
    const MAX_VECTORED_WRITE_SLICES: usize = 1024;

    for chunk in writes.chunks(MAX_VECTORED_WRITE_SLICES) {
        let mut io_slices = chunk
            .iter()
            .filter(|w| !w.write.data.is_empty())
            .map(|w| IoSlice::new(&w.write.data))
            .collect::<Vec<_>>();

        if !io_slices.is_empty() {
            write_all_vectored(file, &mut io_slices)?;
        }
    }

    Ok(())
}

/// Writes a batch's records at their places in `file`, a chunk whose first
/// byte is the log's offset `file_start`: its preallocated end lies past its
/// records, so appending would put them after the reserved space. Records
/// that follow each other are gathered into `gathered` for one write, up to
/// [`GATHER_BYTES_MAX`]; a larger one is written where it lies.
fn write_batch_at<W>(
    file: &File,
    file_start: u64,
    writes: &[QueuedWrite<W>],
    gathered: &mut Vec<u8>,
) -> Result<(), io::Error>
where
    W: WalTypes,
{
    gathered.clear();
    // Where in the file `gathered` belongs.
    let mut gathered_at = 0;

    for w in writes {
        let data = &w.write.data;
        if data.is_empty() {
            continue;
        }
        let at = w
            .write
            .upto_offset
            .checked_sub(data.len() as u64)
            .and_then(|start| start.checked_sub(file_start))
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "a write of {} bytes up to offset {} starts before \
                         its chunk at {}",
                        data.len(),
                        w.write.upto_offset,
                        file_start
                    ),
                )
            })?;

        let follows = gathered_at + gathered.len() as u64 == at;
        if !gathered.is_empty()
            && (!follows || gathered.len() + data.len() > GATHER_BYTES_MAX)
        {
            file.write_all_at(gathered, gathered_at)?;
            gathered.clear();
        }
        if data.len() > GATHER_BYTES_MAX {
            file.write_all_at(data, at)?;
            continue;
        }
        if gathered.is_empty() {
            gathered_at = at;
        }
        gathered.extend_from_slice(data);
    }

    if !gathered.is_empty() {
        file.write_all_at(gathered, gathered_at)?;
        gathered.clear();
    }
    Ok(())
}

/// Records gathered for one positional write at most, so the buffer stays
/// small whatever the batch.
const GATHER_BYTES_MAX: usize = 256 * 1024;

/// Cuts a closed preallocated chunk back to its records, which end at the
/// log's offset `end` (where the next chunk starts). Its next fsync, which
/// `sync_data_files` makes before the next chunk's, makes the cut durable;
/// until then recovery cuts it again (`Chunk::handle_record_error`). An
/// fsync here would hold up the writes waiting for the next batch.
fn cut_to_records<W>(closed: &FileEntry<W>, end: u64) -> Result<(), io::Error>
where W: WalTypes {
    let len = end.checked_sub(closed.starting_offset).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "the next chunk at {} starts before the closed one at {}",
                end, closed.starting_offset
            ),
        )
    })?;
    if closed.f.metadata()?.len() > len {
        closed.f.set_len(len)?;
    }
    Ok(())
}

/// Writes every slice, resuming a partial write in place.
///
/// `IoSlice::advance_slices` trims the already-written prefix from the front
/// of `io_slices`, so a partial write does not rebuild the slice list.
fn write_all_vectored(
    file: &mut &File,
    io_slices: &mut [IoSlice<'_>],
) -> Result<(), io::Error> {
    let mut remaining = io_slices;

    while !remaining.is_empty() {
        let written = match file.write_vectored(remaining) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "failed to write whole buffer",
                ));
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };

        IoSlice::advance_slices(&mut remaining, written);
    }

    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::Arc;
    use std::sync::mpsc::Receiver;
    use std::sync::mpsc::SyncSender;
    use std::sync::mpsc::sync_channel;
    use std::time::Duration;
    use std::time::Instant;

    use crate::Config;
    use crate::WalTypes;
    use crate::wal::atomic_flush_metrics::AtomicFlushMetrics;
    use crate::wal::batch_wait::BatchWait;
    use crate::wal::flush_request::SeqRequest;
    use crate::wal::flush_request::WorkerRequest;
    use crate::wal::flush_request::WriteRequest;
    use crate::wal::flush_worker::FlushWorker;
    use crate::wal::flush_worker::WorkerState;
    use crate::wal::write_batch::WriteBatch;

    #[derive(Debug, Default, Clone, PartialEq, Eq)]
    struct TestWal;

    impl WalTypes for TestWal {
        type Action = String;
        type Checkpoint = String;
        type Callback = SyncSender<Result<(), io::Error>>;
    }

    fn worker(
        rx: Receiver<SeqRequest<TestWal>>,
        flush_batch_wait: Duration,
    ) -> FlushWorker<TestWal> {
        let mut config = Config::new("no-such-dir");
        config.flush_batch_wait = Some(flush_batch_wait);
        config.flush_batch_max_items = Some(8);

        FlushWorker {
            rx,
            files: Vec::new(),
            metrics: Arc::new(AtomicFlushMetrics::default()),
            batch_wait: BatchWait::new(
                config.flush_batch_wait(),
                config.flush_batch_wait_adaptive(),
            ),
            config: Arc::new(config),
            worker_state: Arc::new(WorkerState::new(1024)),
            gathered: Vec::new(),
        }
    }

    fn write_request(seq: u64) -> SeqRequest<TestWal> {
        SeqRequest {
            seq,
            queued_at: Instant::now(),
            req: WorkerRequest::Write(WriteRequest {
                upto_offset: seq,
                data: vec![seq as u8],
                sync: false,
                callback: None,
            }),
        }
    }

    #[test]
    fn test_worker_state_waits_for_completion() -> Result<(), io::Error> {
        let state = WorkerState::new(1024);

        state.complete(3);

        assert_eq!(3, state.done_seq());
        state.wait_for(2)?;
        state.wait_for(3)?;
        Ok(())
    }

    #[test]
    fn test_worker_state_wait_returns_failure() {
        let state = WorkerState::new(1024);
        let err = io::Error::new(io::ErrorKind::PermissionDenied, "no write");

        state.fail(err);

        let got = state.wait_for(1).unwrap_err();
        assert_eq!(io::ErrorKind::PermissionDenied, got.kind());
        assert_eq!("no write", got.to_string());
    }

    #[test]
    fn test_sync_data_files_empty_file_list() -> Result<(), io::Error> {
        let (_tx, rx) = sync_channel(1);
        let mut worker = worker(rx, Duration::ZERO);

        worker.sync_data_files(10)?;

        assert!(worker.files.is_empty());
        Ok(())
    }

    #[test]
    fn test_collect_write_batch_stops_at_deadline() {
        let (_tx, rx) = sync_channel(1);
        let mut worker = worker(rx, Duration::ZERO);
        let mut batch = WriteBatch::new(8);
        assert!(batch.push_seq_request(write_request(1)));

        worker.collect_write_batch(&mut batch);

        assert_eq!(1, batch.writes.len());
        assert_eq!(1, batch.max_seq);
        assert!(batch.last_non_flush.is_none());
    }

    #[test]
    fn test_adaptive_collect_takes_queued_writes_without_waiting() {
        let (tx, rx) = sync_channel(4);
        tx.send(write_request(2)).unwrap();
        tx.send(write_request(3)).unwrap();
        let mut worker = worker(rx, Duration::from_secs(10));
        worker.batch_wait = BatchWait::new(Duration::from_secs(10), true);
        let mut batch = WriteBatch::new(8);
        assert!(batch.push_seq_request(write_request(1)));

        let waited = worker.collect_write_batch(&mut batch);

        assert_eq!(3, batch.writes.len());
        assert_eq!(3, batch.max_seq);
        assert!(waited < Duration::from_secs(5), "{:?}", waited);
        drop(tx);
    }

    #[test]
    fn test_collect_write_batch_stops_at_non_write_request() {
        let (tx, rx) = sync_channel(1);
        tx.send(SeqRequest {
            seq: 2,
            queued_at: Instant::now(),
            req: WorkerRequest::RemoveChunks {
                chunk_paths: vec!["obsolete".to_string()],
            },
        })
        .unwrap();

        let mut worker = worker(rx, Duration::from_secs(1));
        let mut batch = WriteBatch::new(8);
        assert!(batch.push_seq_request(write_request(1)));

        worker.collect_write_batch(&mut batch);

        assert_eq!(1, batch.writes.len());
        assert_eq!(1, batch.max_seq);
        let last = batch.last_non_flush.unwrap();
        assert_eq!(2, last.seq);
        assert!(matches!(
            last.req,
            WorkerRequest::RemoveChunks { chunk_paths }
                if chunk_paths == vec!["obsolete".to_string()]
        ));
    }
}
