//! The longest applies of a load: creates N znodes of 100 bytes under P parents (1,000 by
//! default, the `load` workload's shape; 1 is zk-smoketest's), in turn, a snapshot's clone of the state taken every 200,000 creates
//! and kept for the next 100,000 (as the server keeps it while it encodes), and prints how
//! many applies took over a millisecond and the ten longest. On a running server the same
//! figure is `warden_apply_longest_seconds`, with the preemption of a shared machine in it;
//! here it is the state's own work.
//!
//! `cargo run --release -p warden-state --example stalls [znodes] [parents]`

use std::time::{Duration, Instant};

use warden_proto::request::CreateRequest;
use warden_proto::{Acl, Request};
use warden_state::{State, StateConfig, Txn, TxnKind};

const SNAPSHOT_EVERY: usize = 200_000;

fn main() {
    let arg = |n: usize, default: usize| {
        std::env::args()
            .nth(n)
            .map_or(default, |a| a.parse().expect("a number"))
    };
    let (total, parents) = (arg(1, 1_000_000), arg(2, 1_000));
    let mut state = State::new(StateConfig::default());
    let mut time_ms = 1_700_000_000_000i64;
    let session = state
        .apply(&txn(
            0,
            time_ms,
            TxnKind::CreateSession {
                timeout_ms: 10_000,
                password: vec![0; 16],
            },
        ))
        .created_session
        .expect("a session");
    let mut create = |state: &mut State, path: String| {
        time_ms += 1;
        let request = Request::Create(CreateRequest {
            path,
            data: Some(vec![b'x'; 100]),
            acl: Acl::open(),
            flags: 0,
        });
        let txn = txn(session, time_ms, TxnKind::Request(request));
        let started = Instant::now();
        state.apply(&txn);
        started.elapsed()
    };
    create(&mut state, "/bench".into());
    for p in 0..parents {
        create(&mut state, format!("/bench/p{p}"));
    }
    let mut snapshot = None;
    let mut longest: Vec<(Duration, usize, bool)> = Vec::new();
    let mut over_1ms = 0;
    let started = Instant::now();
    for i in 0..total {
        match i % SNAPSHOT_EVERY {
            0 => snapshot = Some(state.clone()),
            n if n == SNAPSHOT_EVERY / 2 => snapshot = None,
            _ => {}
        }
        let took = create(&mut state, format!("/bench/p{}/n{i:08}", i % parents));
        if took > Duration::from_millis(1) {
            over_1ms += 1;
        }
        longest.push((took, i, snapshot.is_some()));
        if longest.len() > 100 {
            longest.sort_unstable_by(|a, b| b.cmp(a));
            longest.truncate(10);
        }
    }
    drop(snapshot);
    println!("{total} creates in {:?}", started.elapsed());
    println!("applies over 1 ms: {over_1ms}");
    longest.sort_unstable_by(|a, b| b.cmp(a));
    for (took, i, cloned) in longest.iter().take(10) {
        let beside = if *cloned {
            ", a snapshot's clone alive"
        } else {
            ""
        };
        println!("  create #{i}: {took:?}{beside}");
    }
}

fn txn(session_id: i64, time_ms: i64, kind: TxnKind) -> Txn {
    Txn {
        session_id,
        time_ms,
        auth: vec![],
        enforce_quota: false,
        kind,
    }
}
