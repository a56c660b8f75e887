//! Bytes per znode: loads 1,000,000 znodes with 100-byte values under 1,000 parents (the
//! shape ZooKeeper's own figure of ~436 live-heap bytes per znode was measured with) and
//! prints what the process holds for them, by resident memory and by bytes allocated; then
//! what a snapshot's copy of the state costs: the copy itself, and the writes made while it
//! lives.
//!
//! `cargo run --release -p warden-state --example memory [znodes]`

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use warden_proto::request::{CreateRequest, SetDataRequest};
use warden_proto::{Acl, Request};
use warden_state::{State, StateConfig, Txn, TxnKind};

/// Counts live heap bytes, to separate what the tree asks for from allocator overhead.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

fn main() {
    let total: usize = std::env::args()
        .nth(1)
        .map_or(1_000_000, |a| a.parse().expect("a number of znodes"));
    let parents = 1_000;
    let per_parent = total / parents;
    let (rss0, live0) = (rss_bytes(), LIVE.load(Ordering::Relaxed));
    let mut state = State::new(StateConfig::default());
    let mut zxid_time = 1_700_000_000_000i64;
    let session = state
        .apply(&Txn {
            session_id: 0,
            time_ms: zxid_time,
            auth: vec![],
            enforce_quota: false,
            kind: TxnKind::CreateSession {
                timeout_ms: 10_000,
                password: vec![0; 16],
            },
        })
        .created_session
        .unwrap();
    let value = vec![b'x'; 100];
    let mut raw = 0usize;
    let mut create = |state: &mut State, path: String| {
        zxid_time += 1;
        raw += path.len() + value.len() + 68;
        state.apply(&Txn {
            session_id: session,
            time_ms: zxid_time,
            auth: vec![],
            enforce_quota: false,
            kind: TxnKind::Request(Request::Create(CreateRequest {
                path,
                data: Some(value.clone()),
                acl: Acl::open(),
                flags: 0,
            })),
        });
    };
    create(&mut state, "/bench".into());
    for p in 0..parents {
        create(&mut state, format!("/bench/p{p}"));
        for c in 0..per_parent {
            create(&mut state, format!("/bench/p{p}/n{c:07}"));
        }
    }
    let n = state.tree().len();
    let rss = rss_bytes() - rss0;
    let live = LIVE.load(Ordering::Relaxed) - live0;
    println!("znodes:               {n}");
    println!(
        "raw data per znode:   {:.0} bytes (path + value + 68-byte Stat)",
        raw as f64 / n as f64
    );
    println!(
        "heap per znode:       {:.0} bytes (allocated, before allocator overhead)",
        live as f64 / n as f64
    );
    println!(
        "RSS per znode:        {:.0} bytes (resident growth of the process)",
        rss as f64 / n as f64
    );
    println!("RSS / raw:            {:.2}", rss as f64 / raw as f64);
    // The server copies the state between two applies to snapshot it (applies wait for the
    // copy, not for the encoding): the pause a snapshot costs.
    let started = std::time::Instant::now();
    let copy = state.clone();
    println!("copy for a snapshot:  {:?}", started.elapsed());
    // Writes while that copy lives (the encoding takes a few hundred ms) pay for whatever the
    // copy shares with the live state; the same writes with no copy alive are the baseline.
    let timed = |what: &str, state: &mut State, write: &mut dyn FnMut(&mut State)| {
        let (rss_before, started) = (rss_bytes(), std::time::Instant::now());
        write(state);
        println!(
            "10,000 {what}: {:?} (RSS {:+} MiB)",
            started.elapsed(),
            (rss_bytes() as isize - rss_before as isize) / (1 << 20)
        );
    };
    let creates = |under: &'static str| {
        move |state: &mut State| {
            for i in 0..10_000 {
                let path = format!("/bench/{under}{i}");
                apply(state, session, zxid_time + 1 + i, write_create(path));
            }
        }
    };
    let mut spread = |state: &mut State| set_spread(state, session, parents, per_parent);
    timed("creates, copy alive", &mut state, &mut creates("a"));
    timed("setData spread, copy alive", &mut state, &mut spread);
    timed("setData spread again, copy alive", &mut state, &mut spread);
    let started = std::time::Instant::now();
    let bytes = warden_state::snapshot::encode(&copy);
    println!(
        "snapshot encode:      {:?} ({} bytes)",
        started.elapsed(),
        bytes.len()
    );
    drop(copy);
    timed("creates, no copy", &mut state, &mut creates("b"));
    timed("setData spread, no copy", &mut state, &mut spread);
    std::hint::black_box(&state);
}

fn apply(state: &mut State, session: i64, time_ms: i64, request: Request) {
    state.apply(&Txn {
        session_id: session,
        time_ms,
        auth: vec![],
        enforce_quota: false,
        kind: TxnKind::Request(request),
    });
}

fn write_create(path: String) -> Request {
    Request::Create(CreateRequest {
        path,
        data: Some(vec![b'x'; 100]),
        acl: Acl::open(),
        flags: 0,
    })
}

/// 10,000 setData of 100 bytes, each on a different node, spread evenly over the whole tree
/// (the worst case for a copy-on-write tree: no two land near each other).
fn set_spread(state: &mut State, session: i64, parents: usize, per_parent: usize) {
    let writes = 10_000;
    for w in 0..writes {
        let at = w * parents * per_parent / writes;
        let path = format!("/bench/p{}/n{:07}", at / per_parent, at % per_parent);
        let request = Request::SetData(SetDataRequest {
            path,
            data: Some(vec![b'y'; 100]),
            version: -1,
        });
        apply(state, session, 1_800_000_000_000, request);
    }
}
