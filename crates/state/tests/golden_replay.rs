//! Replays what real clients sent a real ZooKeeper 3.9.5 (the golden vectors in
//! crates/proto/tests/golden) through `State` and the `WatchRegistry`, and compares every
//! answer with ZooKeeper's: error codes, paths, data, children, ACLs and Stats (apart from
//! zxids and times, which differ by construction), and the watch events sent.
//!
//! Only conversations whose every change came through the recorded connection are replayed
//! (the reconnect scenarios change the tree through a second, unrecorded one).

use std::collections::HashMap;
use std::path::Path;

use warden_proto::types::xid;
use warden_proto::{
    ConnectRequest, ConnectResponse, ErrorCode, Id, OpCode, OpResult, Reader, Record, ReplyHeader,
    Request, Response, Stat, WatcherEvent,
};
use warden_state::acl::digest;
use warden_state::{State, StateConfig, Txn, TxnKind, WatchKind, WatchRegistry};

const REPLAYED: &[&str] = &[
    "java_basic.txt",
    "java_create.txt",
    "java_seq.txt",
    "java_multi.txt",
    "java_acl.txt",
    "java_watches.txt",
    "kazoo_basic.txt",
    "go_short_handshake.txt",
];

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Zxids and times differ between the two servers; session ids are mapped.
fn normalize_stat(s: &Stat, sessions: &HashMap<i64, i64>) -> Stat {
    Stat {
        czxid: 0,
        mzxid: 0,
        pzxid: 0,
        ctime: 0,
        mtime: 0,
        ephemeral_owner: *sessions
            .get(&s.ephemeral_owner)
            .unwrap_or(&s.ephemeral_owner),
        ..*s
    }
}

fn normalize(body: &Response, sessions: &HashMap<i64, i64>) -> Response {
    let st = |s: &Stat| normalize_stat(s, sessions);
    let sorted = |v: &[String]| {
        let mut v = v.to_vec();
        v.sort();
        v
    };
    match body {
        Response::Create2 { path, stat } => Response::Create2 {
            path: path.clone(),
            stat: st(stat),
        },
        Response::Stat(s) => Response::Stat(st(s)),
        Response::GetData { data, stat } => Response::GetData {
            data: data.clone(),
            stat: st(stat),
        },
        Response::GetAcl { acl, stat } => Response::GetAcl {
            acl: acl.clone(),
            stat: st(stat),
        },
        Response::GetChildren { children } => Response::GetChildren {
            children: children.sorted(),
        },
        Response::GetChildren2 { children, stat } => Response::GetChildren2 {
            children: children.sorted(),
            stat: st(stat),
        },
        Response::GetEphemerals { paths } => Response::GetEphemerals {
            paths: sorted(paths),
        },
        Response::Multi(results) => Response::Multi(
            results
                .iter()
                .map(|r| match r {
                    OpResult::Ok { op, response } => OpResult::Ok {
                        op: *op,
                        response: normalize(response, sessions),
                    },
                    e => e.clone(),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Whether the answer depends on nodes outside the scenario's own subtree (the root and the
/// system nodes, where Warden adds ClickHouse's /keeper, and nodes earlier scenarios left).
fn touches_shared_nodes(req: &Request) -> bool {
    match req {
        Request::Multi(ops) | Request::MultiRead(ops) => ops.iter().any(touches_shared_nodes),
        _ => req.path().is_some_and(|p| {
            p == "/" || p.starts_with("/zookeeper") || p.matches('/').count() == 1 && p.len() <= 1
        }),
    }
}

struct Replay {
    state: State,
    watches: WatchRegistry,
    /// ZooKeeper's session id -> ours, and back (for ephemeralOwner).
    sessions: HashMap<i64, i64>,
    session: i64,
    auth: Vec<Id>,
    time: i64,
    /// Answers we computed, by xid, until ZooKeeper's arrives.
    pending: HashMap<i32, (OpCode, ErrorCode, Response, bool)>,
    /// Events we sent and ZooKeeper sent, as (type, path), in order.
    ours: Vec<(i32, String)>,
    theirs: Vec<(i32, String)>,
    compared: usize,
}

impl Replay {
    fn request(&mut self, xid: i32, req: Request) {
        let op = req.op();
        let shared = touches_shared_nodes(&req);
        let (err, body) = match &req {
            Request::CloseSession => {
                let out = self.txn(TxnKind::CloseSession);
                self.fire(&out.triggers);
                (out.err, out.body)
            }
            Request::Auth(a) if a.scheme == "digest" => {
                self.auth
                    .push(Id::new("digest", digest(&String::from_utf8_lossy(&a.auth))));
                return;
            }
            Request::AddWatch(w) => {
                let kind = if w.mode == 0 {
                    WatchKind::Persistent
                } else {
                    WatchKind::PersistentRecursive
                };
                self.watches.add(self.session, &w.path, kind);
                (ErrorCode::OK, Response::Code(ErrorCode::OK))
            }
            Request::RemoveWatches(w) => {
                if self.watches.remove(self.session, &w.path, w.watcher_type) {
                    (ErrorCode::OK, Response::Empty)
                } else {
                    (ErrorCode::NO_WATCHER, Response::Empty)
                }
            }
            Request::CheckWatches(w) => {
                if self.watches.contains(self.session, &w.path, w.watcher_type) {
                    (ErrorCode::OK, Response::Empty)
                } else {
                    (ErrorCode::NO_WATCHER, Response::Empty)
                }
            }
            r if r.is_write() => {
                let out = self.txn(TxnKind::Request(req.clone()));
                self.fire(&out.triggers);
                (out.err, out.body)
            }
            r if State::is_read(r) => {
                let out = self.state.read(self.session, &self.auth, r);
                for w in &out.watches {
                    self.watches.add(self.session, &w.path, w.kind);
                }
                (out.err, out.body)
            }
            // Pings, sync, whoAmI, ...: the connection's business, not the state's.
            _ => return,
        };
        self.pending.insert(xid, (op, err, body, shared));
    }

    fn txn(&mut self, kind: TxnKind) -> warden_state::Outcome {
        self.time += 1;
        self.state.apply(&Txn {
            session_id: self.session,
            time_ms: self.time,
            auth: self.auth.clone(),
            enforce_quota: false,
            kind,
        })
    }

    fn fire(&mut self, triggers: &[warden_state::Trigger]) {
        for t in triggers {
            for d in self.watches.fire(t) {
                self.ours.push((d.event.event_type, d.event.path));
            }
        }
    }

    fn reply(&mut self, source: &str, bytes: &[u8]) {
        let header = ReplyHeader::decode(&mut Reader::new(bytes)).unwrap();
        if header.xid == xid::NOTIFICATION {
            let event = WatcherEvent::decode(&mut Reader::new(&bytes[16..])).unwrap();
            self.theirs.push((event.event_type, event.path));
            return;
        }
        let Some((op, err, body, shared)) = self.pending.remove(&header.xid) else {
            return;
        };
        let (_, theirs) = Response::decode_frame(op, bytes).unwrap();
        assert_eq!(
            err, header.err,
            "{source}: xid {} {op:?}: error code",
            header.xid
        );
        if !shared {
            let back: HashMap<i64, i64> = self.sessions.iter().map(|(z, w)| (*w, *z)).collect();
            assert_eq!(
                normalize(&body, &back),
                normalize(&theirs, &HashMap::new()),
                "{source}: xid {} {op:?}: answer",
                header.xid
            );
        }
        self.compared += 1;
    }
}

#[test]
fn state_answers_as_zookeeper_did() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../proto/tests/golden");
    let mut total = 0;
    for name in REPLAYED {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let mut replay = Replay {
            state: State::new(StateConfig::default()),
            watches: WatchRegistry::default(),
            sessions: HashMap::new(),
            session: 0,
            auth: vec![Id::new("ip", "127.0.0.1")],
            time: 1_700_000_000_000,
            pending: HashMap::new(),
            ours: Vec::new(),
            theirs: Vec::new(),
            compared: 0,
        };
        let mut connected = false;
        let mut connect_seen = false;
        for line in text.lines() {
            let (dir, bytes) = match line.split_once(' ') {
                Some(("C", h)) => ('C', hex(h.trim())),
                Some(("S", h)) => ('S', hex(h.trim())),
                _ => continue,
            };
            match (dir, connect_seen, connected) {
                ('C', false, _) => {
                    let req = ConnectRequest::decode(&mut Reader::new(&bytes)).unwrap();
                    assert_eq!(req.session_id, 0, "{name}: replayed scenarios start afresh");
                    connect_seen = true;
                }
                ('S', true, false) => {
                    let resp = ConnectResponse::decode(&mut Reader::new(&bytes)).unwrap();
                    let out = replay.txn(TxnKind::CreateSession {
                        timeout_ms: resp.timeout_ms,
                        password: resp.password,
                    });
                    replay.session = out.created_session.unwrap();
                    replay.sessions.insert(resp.session_id, replay.session);
                    connected = true;
                }
                ('C', true, true) => {
                    if let Ok((header, req)) = Request::decode_frame(&bytes) {
                        replay.request(header.xid, req);
                    }
                }
                ('S', true, true) => replay.reply(name, &bytes),
                _ => panic!("{name}: unexpected frame order"),
            }
        }
        assert_eq!(replay.ours, replay.theirs, "{name}: watch events");
        assert!(replay.compared > 0, "{name}: nothing compared");
        eprintln!(
            "{name}: {} answers, {} events",
            replay.compared,
            replay.theirs.len()
        );
        total += replay.compared;
    }
    eprintln!("{total} answers compared with ZooKeeper's");
}
