//! Differential test: a real Apache ZooKeeper 3.9.5 and a real `warden server`, each started
//! from the same unmodified zoo.cfg on a free loopback port, receive the same long random
//! operation sequences through the independent `zookeeper-client` crate, and must answer alike.
//!
//! Each round (one seed) runs four sessions: slot 0 anonymous, slot 1 user1 (connected through a
//! proxy that cuts its connection for a while: it reconnects to the same session and
//! re-registers its watches), slot 2 user2 (closed part-way and replaced by a session that
//! authenticates later, by addAuth), slot 3 user1+user2 with a 4 s timeout (its client is
//! dropped without closing part-way, so its session expires; then replaced). Operations:
//! create (persistent, ephemeral, sequential, container, TTL; create2 with its Stat) with valid
//! and invalid ACLs (world, auth, digest, ip), delete and setData with versions, exists /
//! getData / getChildren(2) with and without watches, getACL / setACL, multi (create, delete,
//! setData, check; many failing), multiRead, addWatch (persistent, recursive), getEphemerals,
//! getAllChildrenNumber, sync, whoAmI, addAuth. Then a TTL phase, and in the last round an
//! authentication failure and requests around jute.maxbuffer.
//!
//! Compared after every operation: the error code or the answer (data, sorted children, Stat
//! apart from times, ACLs, sequential names, multi results, ephemerals, descendant counts, auth
//! identities) and the watch events each session received (type, session state, path and the
//! event's zxid), per session, as the set delivered between two operations (the order inside
//! one operation is not observable through the client). Zxids are compared as offsets from the
//! round's first transaction: both servers give every transaction (failed writes and session
//! creation/closing included) the next zxid, so offsets must agree exactly. ephemeralOwner is
//! mapped to "the k-th session of this round". Every few hundred operations, after each session
//! ends and at the end, the whole tree (data, Stat, ACL, children) is compared, read by a
//! super-user session.
//!
//! Deliberate differences, mapped rather than hidden: Warden has ClickHouse Keeper's `/keeper`
//! subtree, so `/keeper` is removed from the root's children (and the root's numChildren,
//! getAllChildrenNumber("/")); the root's cversion is compared as the change since the round
//! began; `/zookeeper` and `/keeper` are left out of tree comparisons. Session ids and times
//! differ and are never compared. Orders ZooKeeper takes from a hash set are compared sorted:
//! children, whoAmI identities, ACL entries (an `auth` entry expands into the connection's
//! identities in hash order), getEphemerals.
//!
//! Time: containers and TTL nodes are cleaned up by both servers every 200 ms
//! (`znode.container.checkIntervalMs`). Whenever an operation may have emptied a container the
//! test waits until both servers have deleted every eligible container before going on, so the
//! sequence stays deterministic (when one check deletes several, their zxids are compared as a
//! range: each server picks its own order); random TTL nodes live an hour; a TTL phase per round
//! creates short-lived TTL nodes and waits, one expiry at a time, for both servers to expire
//! them.
//!
//! A mismatch in a read's answer or in watch events does not change either tree: the test goes
//! on, counts them all and fails at the end, showing the first `MAX_SOFT_MISMATCHES_SHOWN`. Any
//! other mismatch stops the test at once. Each message names the seed, the operation, both
//! answers and the operations before.
//!
//! Knobs: `WARDEN_DIFF_SEEDS=<seed>[,<seed>...]` or `random`, `WARDEN_DIFF_OPS=<n>` per round,
//! `WARDEN_DIFF_MAX_MISMATCHES=<n>`, `WARDEN_DIFF_ACLS=readable` (only ACLs every session may
//! read: leaves out the read-permission check on watch events, to look for other differences),
//! `WARDEN_DIFF_TRACE=<tracing filter>` (e.g. `zookeeper_client=debug`).

mod support;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::join_all;
use zookeeper_client::{
    Acl, Acls, AddWatchMode, AuthId, Client, CreateMode, MultiReadResult, MultiWriteError,
    MultiWriteResult, Permission, PersistentWatcher, SessionState, Stat, WatchedEvent,
};

use support::proxy::Proxy;
use support::servers::{ServerProcess, spawn_warden, spawn_zookeeper};

/// The whole test, server start included, must end within this.
const TEST_BUDGET: Duration = Duration::from_secs(175);
/// How long each server may take to answer `srvr` after it starts.
const START_TIMEOUT: Duration = Duration::from_secs(90);
/// A hard limit on every single request.
const OP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long both servers may take to delete an eligible container, expire a TTL node or a
/// session.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(15);

const DEFAULT_SEEDS: [u64; 3] = [0x5eed_0001, 0x5eed_0002, 0x5eed_0003];
const DEFAULT_OPS: usize = 2000;
/// Full tree comparisons every this many operations (and at every session end).
const DUMP_EVERY: usize = 300;

const TICK_MS: u64 = 500;
const CHECK_INTERVAL_MS: u64 = 200;
const SESSION_TIMEOUT: Duration = Duration::from_secs(20);
/// The session that is dropped without closing, then expires.
const EXPIRING_SESSION_TIMEOUT: Duration = Duration::from_secs(4);
const SLOTS: usize = 4;
/// Slot closed explicitly part-way, then replaced by a new session.
const CLOSING_SLOT: usize = 2;
/// Slot whose client is dropped without closing (detached), so its session expires.
const EXPIRING_SLOT: usize = 3;
/// Slot connected through a proxy that cuts its connection for a while: the client reconnects
/// to the same session and re-registers its watches (setWatches/setWatches2).
const CUT_SLOT: usize = 1;
/// Operations (of the other slots) run while the cut slot is disconnected.
const CUT_OPS: usize = 25;
/// zookeeper-client gives up a connection after 2/5 of the session timeout without traffic;
/// the cut slot notices the cut at once (EOF) and must reconnect well within this.
const RECONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_ONESHOT_PER_SLOT: usize = 150;
const MAX_PERSISTENT_PER_SLOT: usize = 3;
/// Mismatches the test goes on after (see `Round::soft`) are all counted; this many are shown.
const MAX_SOFT_MISMATCHES_SHOWN: usize = 8;

/// `WARDEN_DIFF_ACLS=readable`: see the module's documentation.
fn readable_acls_only() -> bool {
    std::env::var("WARDEN_DIFF_ACLS").is_ok_and(|v| v == "readable")
}

fn soft_mismatches_shown() -> usize {
    std::env::var("WARDEN_DIFF_MAX_MISMATCHES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(MAX_SOFT_MISMATCHES_SHOWN)
}
/// TTL of the TTL nodes of the random phase: long enough never to expire during the test.
const LONG_TTL_MS: u64 = 3_600_000;
const SHORT_TTL_MS: u64 = 300;

const USER1: &str = "user1:pw1";
const USER2: &str = "user2:pw2";
const USER3: &str = "user3:pw3";
const SUPER: &str = "super:secret";
/// base64(sha1(user:password)), as DigestAuthenticationProvider computes it.
const USER1_DIGEST: &str = "user1:GMJqCvSAmNfv41XqBotWHO0HsNc=";
const USER2_DIGEST: &str = "user2:bpD4uPzrrsGNcJsBFLRErJIlBog=";
const SUPER_DIGEST: &str = "super:lK75jTNcA+U9vtVEw5vB51mj/w4=";

const NAMES: [&str; 4] = ["a", "b", "c", "ü"];
const SPECIAL_PATHS: [&str; 5] = [
    "/",
    "/zookeeper",
    "/zookeeper/quota",
    "/zookeeper/config",
    "/zookeeper/none",
];

/// The zoo.cfg both servers read (each adds dataDir, clientPort and clientPortAddress).
fn zoo_cfg_body() -> String {
    format!(
        "tickTime={TICK_MS}\ninitLimit=10\nsyncLimit=5\nminSessionTimeout={}\nmaxSessionTimeout=30000\n\
         forceSync=no\nadmin.enableServer=false\n4lw.commands.whitelist=srvr\n\
         extendedTypesEnabled=true\nDigestAuthenticationProvider.superDigest={SUPER_DIGEST}\n\
         znode.container.checkIntervalMs={CHECK_INTERVAL_MS}\n",
        2 * TICK_MS
    )
}

/// ZooKeeper reads `znode.container.*` only as JVM system properties; the other two are also in
/// zoo.cfg (which ZooKeeper turns into `zookeeper.*` properties) but are passed here too in case
/// they are read before the file.
fn zookeeper_jvm_opts() -> String {
    format!(
        "-Dznode.container.checkIntervalMs={CHECK_INTERVAL_MS} -Dzookeeper.extendedTypesEnabled=true \
         -Dzookeeper.DigestAuthenticationProvider.superDigest={SUPER_DIGEST}"
    )
}

/// ACL lists the random operations choose from; some are invalid on purpose.
static ACLS: LazyLock<Vec<(&'static str, Vec<Acl>)>> = LazyLock::new(|| {
    let acl = |perms: Permission, scheme: &str, id: &str| Acl::new(perms, AuthId::new(scheme, id));
    use Permission as P;
    vec![
        ("open", vec![acl(P::ALL, "world", "anyone")]),
        ("read-only", vec![acl(P::READ, "world", "anyone")]),
        ("creator", vec![acl(P::ALL, "auth", "")]),
        ("user1", vec![acl(P::ALL, "digest", USER1_DIGEST)]),
        (
            "user2-rwc+world-r",
            vec![
                acl(P::READ | P::WRITE | P::CREATE, "digest", USER2_DIGEST),
                acl(P::READ, "world", "anyone"),
            ],
        ),
        (
            "user1-cdr+user2-ar",
            vec![
                acl(P::CREATE | P::DELETE | P::READ, "digest", USER1_DIGEST),
                acl(P::ADMIN | P::READ, "digest", USER2_DIGEST),
            ],
        ),
        ("ip-loopback", vec![acl(P::ALL, "ip", "127.0.0.1")]),
        (
            "ip-10/8+world-rc",
            vec![
                acl(P::ALL, "ip", "10.0.0.0/8"),
                acl(P::READ | P::CREATE, "world", "anyone"),
            ],
        ),
        ("world-none", vec![acl(P::NONE, "world", "anyone")]),
        ("bad-world-id", vec![acl(P::ALL, "world", "someone")]),
        ("bad-digest-nocolon", vec![acl(P::ALL, "digest", "nocolon")]),
        ("bad-scheme", vec![acl(P::ALL, "nosuch", "x")]),
        ("bad-ip-bits", vec![acl(P::ALL, "ip", "127.0.0.1/33")]),
        ("bad-ip", vec![acl(P::ALL, "ip", "not-an-ip")]),
        (
            "bad-digest-two-colons",
            vec![acl(P::ALL, "digest", "a:b:c")],
        ),
        (
            "auth-any-id",
            vec![acl(
                P::READ | P::WRITE | P::CREATE | P::DELETE,
                "auth",
                "whatever",
            )],
        ),
        (
            "open-twice",
            vec![
                acl(P::ALL, "world", "anyone"),
                acl(P::ALL, "world", "anyone"),
            ],
        ),
        (
            "user1+creator",
            vec![
                acl(P::ALL, "digest", USER1_DIGEST),
                acl(P::READ | P::ADMIN, "auth", ""),
            ],
        ),
        ("digest-empty-user", vec![acl(P::READ, "digest", ":b")]),
        ("ip-v6-loopback", vec![acl(P::ALL, "ip", "::1")]),
    ]
});

/// Indices in `ACLS` of the lists that grant READ to every session of the test (all connect
/// from 127.0.0.1), and of the invalid ones.
const READABLE_ACLS: [usize; 12] = [0, 1, 4, 6, 7, 9, 10, 11, 12, 13, 14, 16];

// ---------------------------------------------------------------------------------------------
// Operations

/// Data with a short Debug form.
#[derive(Clone)]
struct Data(Vec<u8>);

impl fmt::Debug for Data {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&show_data(&self.0))
    }
}

fn show_data(bytes: &[u8]) -> String {
    if bytes.len() <= 24 {
        format!("\"{}\"", bytes.escape_ascii())
    } else {
        let fnv = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |hash, &b| {
            (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        format!(
            "\"{}\"..({} bytes, fnv {fnv:016x})",
            bytes[..16].escape_ascii(),
            bytes.len()
        )
    }
}

#[derive(Debug, Clone)]
enum MultiOp {
    Create {
        path: String,
        data: Data,
        mode: CreateMode,
        ttl_ms: Option<u64>,
        acl: usize,
    },
    Delete {
        path: String,
        version: Option<i32>,
    },
    SetData {
        path: String,
        data: Data,
        version: Option<i32>,
    },
    Check {
        path: String,
        version: i32,
    },
}

#[derive(Debug, Clone)]
enum Op {
    Create {
        slot: usize,
        path: String,
        data: Data,
        mode: CreateMode,
        ttl_ms: Option<u64>,
        acl: usize,
    },
    Delete {
        slot: usize,
        path: String,
        version: Option<i32>,
    },
    SetData {
        slot: usize,
        path: String,
        data: Data,
        version: Option<i32>,
    },
    GetData {
        slot: usize,
        path: String,
        watch: bool,
    },
    Exists {
        slot: usize,
        path: String,
        watch: bool,
    },
    GetChildren {
        slot: usize,
        path: String,
        watch: bool,
        with_stat: bool,
    },
    GetAcl {
        slot: usize,
        path: String,
    },
    SetAcl {
        slot: usize,
        path: String,
        acl: usize,
        version: Option<i32>,
    },
    Multi {
        slot: usize,
        ops: Vec<MultiOp>,
    },
    MultiRead {
        slot: usize,
        /// (true: getData, false: getChildren, path)
        ops: Vec<(bool, String)>,
    },
    AddWatch {
        slot: usize,
        path: String,
        recursive: bool,
    },
    GetEphemerals {
        slot: usize,
        path: String,
    },
    CountDescendants {
        slot: usize,
        path: String,
    },
    Sync {
        slot: usize,
        path: String,
    },
    WhoAmI {
        slot: usize,
    },
    AddAuth {
        slot: usize,
        credentials: &'static str,
    },
}

impl Op {
    fn slot(&self) -> usize {
        match self {
            Op::Create { slot, .. }
            | Op::Delete { slot, .. }
            | Op::SetData { slot, .. }
            | Op::GetData { slot, .. }
            | Op::Exists { slot, .. }
            | Op::GetChildren { slot, .. }
            | Op::GetAcl { slot, .. }
            | Op::SetAcl { slot, .. }
            | Op::Multi { slot, .. }
            | Op::MultiRead { slot, .. }
            | Op::AddWatch { slot, .. }
            | Op::GetEphemerals { slot, .. }
            | Op::CountDescendants { slot, .. }
            | Op::Sync { slot, .. }
            | Op::WhoAmI { slot }
            | Op::AddAuth { slot, .. } => *slot,
        }
    }

    fn kind(&self) -> String {
        match self {
            Op::Create { mode, ttl_ms, .. } => match (mode, ttl_ms) {
                (CreateMode::Persistent, Some(_)) => "create ttl".into(),
                (CreateMode::PersistentSequential, Some(_)) => "create ttl-sequential".into(),
                (mode, _) => format!("create {mode:?}"),
            },
            Op::Delete { .. } => "delete".into(),
            Op::SetData { .. } => "setData".into(),
            Op::GetData { watch, .. } => format!("getData watch={watch}"),
            Op::Exists { watch, .. } => format!("exists watch={watch}"),
            Op::GetChildren {
                watch, with_stat, ..
            } => format!(
                "getChildren{} watch={watch}",
                if *with_stat { "2" } else { "" }
            ),
            Op::GetAcl { .. } => "getACL".into(),
            Op::SetAcl { .. } => "setACL".into(),
            Op::Multi { .. } => "multi".into(),
            Op::MultiRead { .. } => "multiRead".into(),
            Op::AddWatch { recursive, .. } => {
                format!(
                    "addWatch {}",
                    if *recursive {
                        "recursive"
                    } else {
                        "persistent"
                    }
                )
            }
            Op::GetEphemerals { .. } => "getEphemerals".into(),
            Op::CountDescendants { .. } => "getAllChildrenNumber".into(),
            Op::Sync { .. } => "sync".into(),
            Op::WhoAmI { .. } => "whoAmI".into(),
            Op::AddAuth { .. } => "addAuth".into(),
        }
    }

    /// Operations that change no znode and leave no different watch behind when both servers
    /// answered with the same kind of outcome.
    fn is_read(&self) -> bool {
        matches!(
            self,
            Op::GetData { .. }
                | Op::Exists { .. }
                | Op::GetChildren { .. }
                | Op::GetAcl { .. }
                | Op::MultiRead { .. }
                | Op::GetEphemerals { .. }
                | Op::CountDescendants { .. }
                | Op::Sync { .. }
                | Op::WhoAmI { .. }
        )
    }

    /// Whether a success may have emptied a container (so cleanup must be waited for).
    fn may_empty_container(&self) -> bool {
        matches!(self, Op::Delete { .. } | Op::Multi { .. })
    }
}

fn create_options(
    mode: CreateMode,
    ttl_ms: Option<u64>,
    acl: usize,
) -> zookeeper_client::CreateOptions<'static> {
    let options = mode.with_acls(Acls::new(&ACLS[acl].1));
    match ttl_ms {
        Some(ttl) => options.with_ttl(Duration::from_millis(ttl)),
        None => options,
    }
}

fn is_sequential(mode: CreateMode) -> bool {
    matches!(
        mode,
        CreateMode::PersistentSequential | CreateMode::EphemeralSequential
    )
}

// ---------------------------------------------------------------------------------------------
// One server's side of the conversation

/// What an operation did, read from a successful answer (used to steer the generator).
#[derive(Default)]
struct Effect {
    /// (path, is a container)
    created: Vec<(String, bool)>,
    deleted: Vec<String>,
}

struct Answer {
    text: String,
    /// A short class for the coverage counters ("ok", "NoAuth", "failed@1:BadVersion", ...).
    class: String,
    effect: Effect,
}

impl Answer {
    fn new(text: String, class: impl Into<String>) -> Answer {
        Answer {
            text,
            class: class.into(),
            effect: Effect::default(),
        }
    }

    fn error(error: &zookeeper_client::Error) -> Answer {
        let class = error_class(error);
        Answer::new(format!("error {error:?}"), class)
    }
}

fn error_class(error: &zookeeper_client::Error) -> String {
    let debug = format!("{error:?}");
    debug
        .split(['(', ' ', '{'])
        .next()
        .unwrap_or("")
        .to_string()
}

type EventFuture = Pin<Box<dyn Future<Output = WatchedEvent> + Send>>;

struct Pending {
    label: String,
    future: EventFuture,
}

async fn timed<T>(what: &str, future: impl Future<Output = T>) -> Result<T, String> {
    tokio::time::timeout(OP_TIMEOUT, future)
        .await
        .map_err(|_| format!("{what}: no answer within {OP_TIMEOUT:?}"))
}

async fn connect(
    address: &str,
    timeout: Duration,
    auths: &[&str],
    detached: bool,
) -> Result<Client, String> {
    let mut connector = Client::connector().with_session_timeout(timeout);
    for auth in auths {
        connector = connector.with_auth("digest", auth.as_bytes());
    }
    if detached {
        connector = connector.with_detached();
    }
    timed(&format!("connect to {address}"), connector.connect(address))
        .await?
        .map_err(|e| format!("connect to {address}: {e:?}"))
}

/// Drops `client` (the last handle to its session) and waits until the session task has ended:
/// for a normal client that is after the server answered closeSession.
async fn close(client: Client) -> Result<SessionState, String> {
    let mut state = client.state_watcher();
    drop(client);
    timed("closing a session", async {
        let mut current = state.peek_state();
        while !current.is_terminated() {
            current = state.changed().await;
        }
        current
    })
    .await
}

struct Side {
    name: &'static str,
    address: String,
    /// A super-user session that only reads: tree dumps, cleanup polls.
    observer: Client,
    observer_id: i64,
    slots: Vec<Option<Client>>,
    /// Slot → index in `session_ids`.
    slot_session: Vec<usize>,
    /// Every session of this round, in order of creation.
    session_ids: Vec<i64>,
    /// The zxid of the round's first transaction (creating the round root).
    base: i64,
    root_cversion: i32,
    /// Root children that only this server has (`keeper` on Warden).
    hidden_root_children: Vec<String>,
    /// Number of nodes in those subtrees.
    hidden_descendants: usize,
    oneshot: Vec<Vec<Pending>>,
    persistent: Vec<Vec<(String, PersistentWatcher)>>,
    /// The cut slot connects through this.
    proxy: Proxy,
    /// The cut slot is disconnected: it takes no operations and no barrier.
    cut: bool,
    /// Zxid ranges of container cleanups that deleted several containers at once: a server
    /// deletes the candidates of one check in an order of its own (ZooKeeper: hash order), so
    /// zxids inside a range are compared as the range only.
    windows: Vec<(i64, i64)>,
}

impl Side {
    async fn open(name: &'static str, address: String, hidden: &[&str]) -> Result<Side, String> {
        let observer = connect(&address, SESSION_TIMEOUT, &[SUPER], false).await?;
        let upstream = address
            .parse()
            .map_err(|e| format!("{name}: address {address}: {e}"))?;
        let proxy = Proxy::start(upstream)
            .await
            .map_err(|e| format!("{name}: proxy: {e}"))?;
        let observer_id = observer.session_id().0;
        let mut side = Side {
            name,
            address,
            observer,
            observer_id,
            slots: (0..SLOTS).map(|_| None).collect(),
            slot_session: vec![0; SLOTS],
            session_ids: Vec::new(),
            base: i64::MAX,
            root_cversion: 0,
            hidden_root_children: hidden.iter().map(|s| s.to_string()).collect(),
            hidden_descendants: 0,
            oneshot: (0..SLOTS).map(|_| Vec::new()).collect(),
            persistent: (0..SLOTS).map(|_| Vec::new()).collect(),
            windows: Vec::new(),
            proxy,
            cut: false,
        };
        let children = side
            .call("list /", side.observer.list_children("/"))
            .await?;
        for hidden in &side.hidden_root_children {
            if !children.contains(hidden) {
                return Err(format!(
                    "{name}: expected /{hidden} (children of /: {children:?})"
                ));
            }
            let path = format!("/{hidden}");
            let below = side
                .call("count", side.observer.count_descendants_number(&path))
                .await?;
            side.hidden_descendants += 1 + below;
        }
        if name == "ZooKeeper" && children.iter().any(|c| c == "keeper") {
            return Err("ZooKeeper unexpectedly has /keeper".into());
        }
        let (_, stat) = side.call("getData /", side.observer.get_data("/")).await?;
        side.root_cversion = stat.cversion;
        Ok(side)
    }

    /// A request that must succeed (setup, dumps, polls).
    async fn call<T>(
        &self,
        what: &str,
        future: impl Future<Output = Result<T, zookeeper_client::Error>>,
    ) -> Result<T, String> {
        timed(&format!("{}: {what}", self.name), future)
            .await?
            .map_err(|e| format!("{}: {what}: {e:?}", self.name))
    }

    async fn connect_slot(
        &mut self,
        slot: usize,
        timeout: Duration,
        auths: &[&str],
        detached: bool,
    ) -> Result<(), String> {
        let address = if slot == CUT_SLOT {
            self.proxy.address()
        } else {
            self.address.clone()
        };
        let client = connect(&address, timeout, auths, detached).await?;
        self.slot_session[slot] = self.session_ids.len();
        self.session_ids.push(client.session_id().0);
        self.slots[slot] = Some(client);
        Ok(())
    }

    fn client(&self, slot: usize) -> Result<Client, String> {
        self.slots[slot]
            .clone()
            .ok_or_else(|| format!("{}: slot {slot} has no session", self.name))
    }

    /// Ends the slot's session: closes it, or for a detached client just drops it (the server
    /// then expires the session). Its watchers go first.
    async fn end_slot(&mut self, slot: usize) -> Result<SessionState, String> {
        // The watchers go only once the session has ended, so that the client does not send
        // removeWatches for them first.
        let oneshot = std::mem::take(&mut self.oneshot[slot]);
        let persistent = std::mem::take(&mut self.persistent[slot]);
        let client = self.slots[slot]
            .take()
            .ok_or_else(|| format!("{}: slot {slot} has no session", self.name))?;
        let state = close(client)
            .await
            .map_err(|e| format!("{}: slot {slot}: {e}", self.name));
        drop((oneshot, persistent));
        state
    }

    // --- normalisation -----------------------------------------------------------------------

    fn zxid(&self, zxid: i64) -> String {
        if zxid == -1 {
            "-1".into()
        } else if zxid == 0 {
            "0".into()
        } else if zxid < self.base {
            "before-round".into()
        } else if let Some(k) = self
            .windows
            .iter()
            .position(|&(first, last)| first <= zxid && zxid <= last)
        {
            format!("cleanup-window{k}")
        } else {
            format!("+{}", zxid - self.base)
        }
    }

    fn owner(&self, owner: i64) -> String {
        if owner == 0 {
            "0".into()
        } else if owner == self.observer_id {
            "observer".into()
        } else if let Some(k) = self.session_ids.iter().position(|&id| id == owner) {
            format!("session{k}")
        } else {
            format!("unknown {owner:#x}")
        }
    }

    fn stat(&self, path: &str, stat: &Stat) -> String {
        let (cversion, children) = if path == "/" {
            (
                format!("Δ{}", stat.cversion - self.root_cversion),
                stat.num_children - self.hidden_root_children.len() as i32,
            )
        } else {
            (stat.cversion.to_string(), stat.num_children)
        };
        format!(
            "{{czxid {} mzxid {} pzxid {} version {} cversion {cversion} aversion {} owner {} dataLength {} numChildren {children}}}",
            self.zxid(stat.czxid),
            self.zxid(stat.mzxid),
            self.zxid(stat.pzxid),
            stat.version,
            stat.aversion,
            self.owner(stat.ephemeral_owner),
            stat.data_length,
        )
    }

    fn children(&self, path: &str, mut children: Vec<String>) -> String {
        if path == "/" {
            children.retain(|c| !self.hidden_root_children.contains(c));
        }
        children.sort();
        format!("{children:?}")
    }

    fn event(&self, slot: usize, label: &str, event: &WatchedEvent) -> String {
        format!(
            "slot{slot} {label} -> {:?} {:?} {:?} zxid {}",
            event.event_type,
            event.session_state,
            event.path,
            self.zxid(event.zxid)
        )
    }

    // --- operations --------------------------------------------------------------------------

    async fn exec(&mut self, op: &Op, index: usize) -> Result<Answer, String> {
        let slot = op.slot();
        let client = self.client(slot)?;
        let what = format!("{}: op #{index} {op:?}", self.name);
        let answer = match op {
            Op::Create {
                path,
                data,
                mode,
                ttl_ms,
                acl,
                ..
            } => {
                let options = create_options(*mode, *ttl_ms, *acl);
                match timed(&what, client.create(path, &data.0, &options)).await? {
                    Ok((stat, sequence)) => {
                        let created = if is_sequential(*mode) {
                            format!("{path}{sequence}")
                        } else {
                            path.clone()
                        };
                        let mut answer = Answer::new(
                            format!("created {created} {}", self.stat(&created, &stat)),
                            "ok",
                        );
                        answer
                            .effect
                            .created
                            .push((created, *mode == CreateMode::Container));
                        answer
                    }
                    Err(e) => Answer::error(&e),
                }
            }
            Op::Delete { path, version, .. } => {
                match timed(&what, client.delete(path, *version)).await? {
                    Ok(()) => {
                        let mut answer = Answer::new("deleted".into(), "ok");
                        answer.effect.deleted.push(path.clone());
                        answer
                    }
                    Err(e) => Answer::error(&e),
                }
            }
            Op::SetData {
                path,
                data,
                version,
                ..
            } => match timed(&what, client.set_data(path, &data.0, *version)).await? {
                Ok(stat) => Answer::new(format!("set {}", self.stat(path, &stat)), "ok"),
                Err(e) => Answer::error(&e),
            },
            Op::GetData { path, watch, .. } => {
                if *watch {
                    match timed(&what, client.get_and_watch_data(path)).await? {
                        Ok((data, stat, watcher)) => {
                            self.oneshot[slot].push(Pending {
                                label: format!("#{index} data-watch {path}"),
                                future: Box::pin(watcher.changed()),
                            });
                            Answer::new(
                                format!("data {} {}", show_data(&data), self.stat(path, &stat)),
                                "ok",
                            )
                        }
                        Err(e) => Answer::error(&e),
                    }
                } else {
                    match timed(&what, client.get_data(path)).await? {
                        Ok((data, stat)) => Answer::new(
                            format!("data {} {}", show_data(&data), self.stat(path, &stat)),
                            "ok",
                        ),
                        Err(e) => Answer::error(&e),
                    }
                }
            }
            Op::Exists { path, watch, .. } => {
                let result = if *watch {
                    timed(&what, client.check_and_watch_stat(path))
                        .await?
                        .map(|(stat, watcher)| {
                            self.oneshot[slot].push(Pending {
                                label: format!("#{index} exist-watch {path}"),
                                future: Box::pin(watcher.changed()),
                            });
                            stat
                        })
                } else {
                    timed(&what, client.check_stat(path)).await?
                };
                match result {
                    Ok(Some(stat)) => {
                        Answer::new(format!("exists {}", self.stat(path, &stat)), "ok")
                    }
                    Ok(None) => Answer::new("does not exist".into(), "none"),
                    Err(e) => Answer::error(&e),
                }
            }
            Op::GetChildren {
                path,
                watch,
                with_stat,
                ..
            } => {
                let result = match (*watch, *with_stat) {
                    (false, false) => timed(&what, client.list_children(path))
                        .await?
                        .map(|children| (children, None, None)),
                    (true, false) => timed(&what, client.list_and_watch_children(path))
                        .await?
                        .map(|(children, watcher)| (children, None, Some(watcher))),
                    (false, true) => timed(&what, client.get_children(path))
                        .await?
                        .map(|(children, stat)| (children, Some(stat), None)),
                    (true, true) => timed(&what, client.get_and_watch_children(path))
                        .await?
                        .map(|(children, stat, watcher)| (children, Some(stat), Some(watcher))),
                };
                match result {
                    Ok((children, stat, watcher)) => {
                        if let Some(watcher) = watcher {
                            self.oneshot[slot].push(Pending {
                                label: format!("#{index} child-watch {path}"),
                                future: Box::pin(watcher.changed()),
                            });
                        }
                        let stat = stat.map(|s| self.stat(path, &s)).unwrap_or_default();
                        Answer::new(
                            format!("children {} {stat}", self.children(path, children)),
                            "ok",
                        )
                    }
                    Err(e) => Answer::error(&e),
                }
            }
            Op::GetAcl { path, .. } => match timed(&what, client.get_acl(path)).await? {
                Ok((acl, stat)) => Answer::new(
                    format!("acl {} {}", show_acl(&acl), self.stat(path, &stat)),
                    "ok",
                ),
                Err(e) => Answer::error(&e),
            },
            Op::SetAcl {
                path, acl, version, ..
            } => match timed(&what, client.set_acl(path, &ACLS[*acl].1, *version)).await? {
                Ok(stat) => Answer::new(format!("acl set {}", self.stat(path, &stat)), "ok"),
                Err(e) => Answer::error(&e),
            },
            Op::Multi { ops, .. } => {
                let mut writer = client.new_multi_writer();
                for op in ops {
                    let added = match op {
                        MultiOp::Create {
                            path,
                            data,
                            mode,
                            ttl_ms,
                            acl,
                        } => {
                            writer.add_create(path, &data.0, &create_options(*mode, *ttl_ms, *acl))
                        }
                        MultiOp::Delete { path, version } => writer.add_delete(path, *version),
                        MultiOp::SetData {
                            path,
                            data,
                            version,
                        } => writer.add_set_data(path, &data.0, *version),
                        MultiOp::Check { path, version } => {
                            writer.add_check_version(path, *version)
                        }
                    };
                    if let Err(e) = added {
                        // Not sent: the same on both sides.
                        return Ok(Answer::new(
                            format!("client refused a sub-op: {e:?}"),
                            "client-refused",
                        ));
                    }
                }
                match timed(&what, writer.commit()).await? {
                    Ok(results) => {
                        let mut answer = Answer::new(String::new(), "ok");
                        let mut parts = Vec::new();
                        for (result, op) in results.iter().zip(ops) {
                            parts.push(match result {
                                MultiWriteResult::Check => "check".to_string(),
                                MultiWriteResult::Delete => {
                                    if let MultiOp::Delete { path, .. } = op {
                                        answer.effect.deleted.push(path.clone());
                                    }
                                    "delete".to_string()
                                }
                                MultiWriteResult::Create { path, stat } => {
                                    let container = matches!(
                                        op,
                                        MultiOp::Create {
                                            mode: CreateMode::Container,
                                            ..
                                        }
                                    );
                                    answer.effect.created.push((path.clone(), container));
                                    format!("create {path} {}", self.stat(path, stat))
                                }
                                MultiWriteResult::SetData { stat } => {
                                    let path = match op {
                                        MultiOp::SetData { path, .. } => path.as_str(),
                                        _ => "?",
                                    };
                                    format!("set {}", self.stat(path, stat))
                                }
                                other => format!("{other:?}"),
                            });
                        }
                        if results.len() != ops.len() {
                            parts.push(format!("{} results for {} ops", results.len(), ops.len()));
                        }
                        answer.text = format!("multi ok [{}]", parts.join(", "));
                        answer
                    }
                    Err(MultiWriteError::OperationFailed { index, source }) => Answer::new(
                        format!("multi failed at op {index}: {source:?}"),
                        format!("failed@{index}:{}", error_class(&source)),
                    ),
                    Err(MultiWriteError::RequestFailed { source }) => Answer::new(
                        format!("multi request failed: {source:?}"),
                        format!("request:{}", error_class(&source)),
                    ),
                }
            }
            Op::MultiRead { ops, .. } => {
                let mut reader = client.new_multi_reader();
                for (data, path) in ops {
                    let added = if *data {
                        reader.add_get_data(path)
                    } else {
                        reader.add_get_children(path)
                    };
                    added.map_err(|e| format!("{what}: the client refused a sub-op: {e:?}"))?;
                }
                match timed(&what, reader.commit()).await? {
                    Ok(results) => {
                        let parts: Vec<String> = results
                            .into_iter()
                            .zip(ops)
                            .map(|(result, (_, path))| match result {
                                MultiReadResult::Data { data, stat } => {
                                    format!("data {} {}", show_data(&data), self.stat(path, &stat))
                                }
                                MultiReadResult::Children { children } => {
                                    format!("children {}", self.children(path, children))
                                }
                                MultiReadResult::Error { err } => format!("error {err:?}"),
                                other => format!("{other:?}"),
                            })
                            .collect();
                        Answer::new(format!("multiRead [{}]", parts.join(", ")), "ok")
                    }
                    Err(e) => Answer::error(&e),
                }
            }
            Op::AddWatch {
                path, recursive, ..
            } => {
                let mode = if *recursive {
                    AddWatchMode::PersistentRecursive
                } else {
                    AddWatchMode::Persistent
                };
                match timed(&what, client.watch(path, mode)).await? {
                    Ok(watcher) => {
                        self.persistent[slot].push((format!("#{index} {mode:?} {path}"), watcher));
                        Answer::new("watching".into(), "ok")
                    }
                    Err(e) => Answer::error(&e),
                }
            }
            Op::GetEphemerals { path, .. } => {
                match timed(&what, client.list_ephemerals(path)).await? {
                    Ok(mut paths) => {
                        paths.sort();
                        Answer::new(format!("ephemerals {paths:?}"), "ok")
                    }
                    Err(e) => Answer::error(&e),
                }
            }
            Op::CountDescendants { path, .. } => {
                match timed(&what, client.count_descendants_number(path)).await? {
                    Ok(n) => {
                        let n = if path == "/" {
                            n - self.hidden_descendants
                        } else {
                            n
                        };
                        Answer::new(format!("descendants {n}"), "ok")
                    }
                    Err(e) => Answer::error(&e),
                }
            }
            Op::Sync { path, .. } => match timed(&what, client.sync(path)).await? {
                Ok(()) => Answer::new("synced".into(), "ok"),
                Err(e) => Answer::error(&e),
            },
            Op::WhoAmI { .. } => match timed(&what, client.list_auth_users()).await? {
                Ok(users) => {
                    // ZooKeeper keeps a connection's identities in a hash set: their order
                    // means nothing.
                    let mut users: Vec<String> = users
                        .iter()
                        .map(|u| format!("{}:{}", u.scheme(), u.user()))
                        .collect();
                    users.sort();
                    Answer::new(format!("users {users:?}"), "ok")
                }
                Err(e) => Answer::error(&e),
            },
            Op::AddAuth { credentials, .. } => {
                match timed(&what, client.auth("digest", credentials.as_bytes())).await? {
                    Ok(()) => Answer::new("authenticated".into(), "ok"),
                    Err(e) => Answer::error(&e),
                }
            }
        };
        Ok(answer)
    }

    /// One request per live session, answered after everything the server sent before it, so
    /// every watch event an earlier operation triggered has reached the client.
    async fn barrier(&self) -> Result<(), String> {
        let clients: Vec<&Client> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(slot, _)| !(self.cut && *slot == CUT_SLOT))
            .filter_map(|(_, client)| client.as_ref())
            .collect();
        let answers = timed(
            &format!("{}: barrier", self.name),
            join_all(clients.iter().map(|c| c.check_stat("/"))),
        )
        .await?;
        for answer in answers {
            answer.map_err(|e| format!("{}: barrier exists(/) failed: {e:?}", self.name))?;
        }
        Ok(())
    }

    /// Every watch event delivered so far and not yet collected, sorted.
    fn collect_events(&mut self) -> Vec<String> {
        let mut delivered: Vec<(usize, String, WatchedEvent)> = Vec::new();
        for slot in 0..SLOTS {
            for mut pending in std::mem::take(&mut self.oneshot[slot]) {
                match (&mut pending.future).now_or_never() {
                    Some(event) => delivered.push((slot, pending.label, event)),
                    None => self.oneshot[slot].push(pending),
                }
            }
            for (label, watcher) in &mut self.persistent[slot] {
                while let Some(event) = watcher.changed().now_or_never() {
                    delivered.push((slot, label.clone(), event));
                }
            }
        }
        let mut events: Vec<String> = delivered
            .iter()
            .map(|(slot, label, event)| self.event(*slot, label, event))
            .collect();
        events.sort();
        events
    }

    /// The tree (without `/zookeeper` and this server's hidden subtrees), one line per node,
    /// read by the super-user observer session.
    async fn dump(&self) -> Result<Vec<String>, String> {
        let mut lines = Vec::new();
        let mut queue = VecDeque::from(["/".to_string()]);
        while let Some(path) = queue.pop_front() {
            let (data, stat) = self
                .call(
                    &format!("dump getData {path}"),
                    self.observer.get_data(&path),
                )
                .await?;
            let (acl, _) = self
                .call(&format!("dump getACL {path}"), self.observer.get_acl(&path))
                .await?;
            let mut children = self
                .call(
                    &format!("dump getChildren {path}"),
                    self.observer.list_children(&path),
                )
                .await?;
            if path == "/" {
                children.retain(|c| c != "zookeeper");
            }
            lines.push(format!(
                "{path} data {} {} acl {} children {}",
                show_data(&data),
                self.stat(&path, &stat),
                show_acl(&acl),
                self.children(&path, children.clone()),
            ));
            if path == "/" {
                children.retain(|c| !self.hidden_root_children.contains(c));
            }
            children.sort();
            for child in children {
                queue.push_back(join_path(&path, &child));
            }
        }
        Ok(lines)
    }

    /// The last zxid the server applied, from `srvr`.
    async fn last_zxid(&self) -> Result<i64, String> {
        let port: u16 = self
            .address
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("{}: no port in {}", self.name, self.address))?;
        let answer = tokio::task::spawn_blocking(move || support::servers::srvr(port))
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{}: srvr did not answer", self.name))?;
        answer
            .lines()
            .find_map(|line| line.strip_prefix("Zxid: 0x"))
            .and_then(|hex| i64::from_str_radix(hex.trim(), 16).ok())
            .ok_or_else(|| format!("{}: no zxid in srvr's answer {answer:?}", self.name))
    }

    async fn probe(&self, path: &str) -> Result<Probe, String> {
        let stat = self
            .call(&format!("probe {path}"), self.observer.check_stat(path))
            .await?;
        Ok(match stat {
            None => Probe::Gone,
            Some(stat) if stat.cversion > 0 && stat.num_children == 0 => Probe::Eligible,
            Some(_) => Probe::Live,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    Gone,
    /// A container with cversion > 0 and no children: the next check deletes it.
    Eligible,
    Live,
}

/// An ACL list, sorted: ZooKeeper expands an `auth` entry into the connection's identities in
/// the order of a hash set, so the order of a stored list means nothing in general.
fn show_acl(acl: &[Acl]) -> String {
    let mut parts: Vec<String> = acl
        .iter()
        .map(|a| format!("{}:{}:{}", a.permission(), a.scheme(), a.id()))
        .collect();
    parts.sort();
    format!("[{}]", parts.join(", "))
}

fn join_path(parent: &str, child: &str) -> String {
    if parent == "/" {
        format!("/{child}")
    } else {
        format!("{parent}/{child}")
    }
}

fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

// ---------------------------------------------------------------------------------------------
// A round: one seed, fresh sessions, its own subtree

#[derive(Default)]
struct Summary {
    ops: usize,
    events: usize,
    dumps: usize,
    dumped_nodes: usize,
    containers_cleaned: usize,
    ttl_expired: usize,
    outcomes: BTreeMap<String, usize>,
}

struct Round<'a> {
    seed: u64,
    round: usize,
    root: String,
    rng: fastrand::Rng,
    zk: Side,
    wd: Side,
    /// Paths that exist (ZooKeeper's answers; Warden's agree or the test has failed).
    known: BTreeSet<String>,
    containers: BTreeSet<String>,
    history: VecDeque<String>,
    summary: Summary,
    /// Mismatches the round went on after (see `Round::soft`), as many as may be shown.
    soft: Vec<String>,
    soft_shown: usize,
    /// Every such mismatch, by kind.
    soft_kinds: BTreeMap<String, usize>,
    /// ZooKeeper's events at the last comparison.
    last_events: Vec<String>,
    servers: &'a mut [ServerProcess; 2],
}

impl Round<'_> {
    /// A mismatch after which the servers' states may have diverged: the round stops.
    fn fail(&mut self, index: &str, message: String) -> String {
        self.describe(index, message, self.history.len())
    }

    /// A mismatch that leaves both servers' trees as they were (a read's answer, watch
    /// events): recorded, and the round goes on so that one run shows every difference.
    fn soft(&mut self, kind: String, index: &str, message: String) {
        *self.soft_kinds.entry(kind).or_default() += 1;
        if self.soft.len() < self.soft_shown {
            let text = self.describe(index, message, 12);
            self.soft.push(text);
        }
    }

    fn describe(&mut self, index: &str, message: String, history: usize) -> String {
        let mut text = format!(
            "MISMATCH between ZooKeeper 3.9.5 and Warden\n  seed {:#x} (round {}, root {}), at {index}\n{message}\n\
             Reproduce: WARDEN_DIFF_SEEDS={:#x} cargo test -p warden --test differential\n\
             Last operations (index, op, answer):\n",
            self.seed, self.round, self.root, self.seed
        );
        let skip = self.history.len().saturating_sub(history);
        for line in self.history.iter().skip(skip) {
            text.push_str("  ");
            text.push_str(line);
            text.push('\n');
        }
        for server in self.servers.iter_mut() {
            if let Err(e) = server.check_alive() {
                text.push_str(&format!("{e}\n"));
            }
        }
        text
    }

    fn remember(&mut self, line: String) {
        if self.history.len() == 40 {
            self.history.pop_front();
        }
        self.history.push_back(line);
    }

    /// Runs `op` on both servers and compares the answers; then waits for container cleanup,
    /// collects watch events and compares them (unless `collect` is false).
    async fn step(&mut self, index: usize, op: &Op, collect: bool) -> Result<Effect, String> {
        let (zk, wd) = tokio::join!(self.zk.exec(op, index), self.wd.exec(op, index));
        let label = format!("op #{index}");
        let (zk, wd) = match (zk, wd) {
            (Ok(zk), Ok(wd)) => (zk, wd),
            (zk, wd) => {
                let message = format!(
                    "  op: {op:?}\n  ZooKeeper: {}\n  Warden:    {}",
                    zk.map(|a| a.text).unwrap_or_else(|e| e),
                    wd.map(|a| a.text).unwrap_or_else(|e| e)
                );
                return Err(self.fail(&label, message));
            }
        };
        self.remember(format!("#{index} {op:?} => {}", zk.text));
        if zk.text != wd.text {
            let message = format!(
                "  op: {op:?}\n  ZooKeeper: {}\n  Warden:    {}",
                zk.text, wd.text
            );
            if op.is_read() && zk.class == wd.class {
                self.soft(format!("answer to {}", op.kind()), &label, message);
            } else {
                return Err(self.fail(&label, message));
            }
        }
        self.summary.ops += 1;
        *self
            .summary
            .outcomes
            .entry(format!("{} → {}", op.kind(), zk.class))
            .or_default() += 1;
        for (path, container) in &zk.effect.created {
            if self.under_root(path) {
                self.known.insert(path.clone());
                if *container {
                    self.containers.insert(path.clone());
                }
            }
        }
        for path in &zk.effect.deleted {
            self.known.remove(path);
            self.containers.remove(path);
        }
        if op.may_empty_container() && !zk.effect.deleted.is_empty() {
            self.settle_containers(&label).await?;
        }
        if collect {
            self.compare_events(&label).await?;
        }
        Ok(zk.effect)
    }

    /// The expiring session's ephemeral, outside the round root where no random operation
    /// reaches it: its deletion tells that the session has expired.
    fn marker(&self) -> String {
        format!("/marker-r{}", self.round)
    }

    fn under_root(&self, path: &str) -> bool {
        path == self.root
            || path
                .strip_prefix(self.root.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
    }

    async fn compare_events(&mut self, label: &str) -> Result<(), String> {
        let (a, b) = tokio::join!(self.zk.barrier(), self.wd.barrier());
        if let Err(e) = a.and(b) {
            return Err(self.fail(label, e));
        }
        let zk = self.zk.collect_events();
        let wd = self.wd.collect_events();
        self.last_events = zk.clone();
        if zk == wd {
            self.summary.events += zk.len();
            return Ok(());
        }
        let shown = self.soft.len() < self.soft_shown;
        // Tell late events from missing ones (only for a mismatch that will be shown).
        let (zk_late, wd_late) = if shown {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let _ = tokio::join!(self.zk.barrier(), self.wd.barrier());
            (self.zk.collect_events(), self.wd.collect_events())
        } else {
            (Vec::new(), Vec::new())
        };
        let only = |a: &[String], b: &[String]| {
            let mut rest = b.to_vec();
            let mut only = Vec::new();
            for event in a {
                match rest.iter().position(|e| e == event) {
                    Some(i) => {
                        rest.remove(i);
                    }
                    None => only.push(event.clone()),
                }
            }
            only
        };
        let (only_zk, only_wd) = (only(&zk, &wd), only(&wd, &zk));
        let mut differing = only_zk.clone();
        differing.extend(only_wd.iter().cloned());
        let context = if shown {
            self.explain_events(&differing).await
        } else {
            Vec::new()
        };
        let message = format!(
            "  watch events after the operation differ\n  only ZooKeeper's: {only_zk:#?}\n  only Warden's: {only_wd:#?}\n\
             \x20 ZooKeeper's, all: {zk:#?}\n  500 ms later, ZooKeeper also delivered: {zk_late:#?}\n  and Warden: {wd_late:#?}\n\
             \x20 context (now, read on ZooKeeper): {context:#?}"
        );
        self.summary.events += zk.len();
        let kind = match (only_zk.is_empty(), only_wd.is_empty()) {
            (true, false) => "watch events: only Warden delivered some",
            (false, true) => "watch events: only ZooKeeper delivered some",
            _ => "watch events: each delivered some the other did not",
        };
        self.soft(kind.to_string(), label, message);
        Ok(())
    }

    /// For events that differ: the receiving session's identities and the node's ACL now.
    async fn explain_events(&self, events: &[String]) -> Vec<String> {
        let mut lines = BTreeSet::new();
        for event in events {
            let slot = event
                .strip_prefix("slot")
                .and_then(|rest| rest.split(' ').next())
                .and_then(|n| n.parse::<usize>().ok());
            let path = event
                .split(" -> ")
                .nth(1)
                .and_then(|rest| rest.split('"').nth(1))
                .unwrap_or("");
            if let Some(client) = slot.and_then(|slot| self.zk.slots[slot].as_ref()) {
                let users = match timed("whoami", client.list_auth_users()).await {
                    Ok(Ok(users)) => {
                        let mut users: Vec<String> = users
                            .iter()
                            .map(|u| format!("{}:{}", u.scheme(), u.user()))
                            .collect();
                        users.sort();
                        format!("{users:?}")
                    }
                    other => format!("{other:?}"),
                };
                lines.insert(format!("slot{} identities {users}", slot.unwrap_or(0)));
            }
            if !path.is_empty() {
                let acl = match timed("getACL", self.zk.observer.get_acl(path)).await {
                    Ok(Ok((acl, _))) => show_acl(&acl),
                    other => format!("{:?}", other.map(|r| r.map(|_| ()))),
                };
                lines.insert(format!("ACL of {path}: {acl}"));
            }
        }
        lines.into_iter().collect()
    }

    /// Waits until both servers have deleted every container the last operation made eligible
    /// (cversion > 0, no children), including containers emptied by those deletions.
    async fn settle_containers(&mut self, label: &str) -> Result<(), String> {
        let deadline = Instant::now() + CLEANUP_TIMEOUT;
        let mut cleaned: i64 = 0;
        loop {
            let mut waiting = Vec::new();
            for path in self.containers.clone() {
                let (zk, wd) = tokio::join!(self.zk.probe(&path), self.wd.probe(&path));
                let (zk, wd) = match (zk, wd) {
                    (Ok(zk), Ok(wd)) => (zk, wd),
                    (zk, wd) => {
                        let message = format!("  probing {path}: {zk:?} / {wd:?}");
                        return Err(self.fail(label, message));
                    }
                };
                match (zk, wd) {
                    (Probe::Gone, Probe::Gone) => {
                        self.containers.remove(&path);
                        self.known.remove(&path);
                        self.summary.containers_cleaned += 1;
                        cleaned += 1;
                        self.remember(format!("  (container {path} deleted by both servers)"));
                    }
                    (Probe::Live, Probe::Live) => {}
                    (zk, wd) => waiting.push((path, zk, wd)),
                }
            }
            if waiting.is_empty() {
                if cleaned >= 2 {
                    let (zk, wd) = tokio::join!(self.zk.last_zxid(), self.wd.last_zxid());
                    let (zk, wd) = match (zk, wd) {
                        (Ok(zk), Ok(wd)) => (zk, wd),
                        (zk, wd) => {
                            return Err(self.fail(label, format!("  srvr: {zk:?} / {wd:?}")));
                        }
                    };
                    self.zk.windows.push((zk - cleaned + 1, zk));
                    self.wd.windows.push((wd - cleaned + 1, wd));
                    self.remember(format!("  ({cleaned} containers cleaned at once: their zxids are compared as a window)"));
                }
                return Ok(());
            }
            if Instant::now() > deadline {
                let message = format!(
                    "  container cleanup did not converge within {CLEANUP_TIMEOUT:?} (path, ZooKeeper, Warden): {waiting:?}"
                );
                return Err(self.fail(label, message));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn compare_trees(&mut self, label: &str) -> Result<(), String> {
        let (zk, wd) = tokio::join!(self.zk.dump(), self.wd.dump());
        let (zk, wd) = match (zk, wd) {
            (Ok(zk), Ok(wd)) => (zk, wd),
            (zk, wd) => {
                let message = format!("  tree dump failed: {:?} / {:?}", zk.err(), wd.err());
                return Err(self.fail(label, message));
            }
        };
        if zk != wd {
            let zk_set: BTreeSet<&String> = zk.iter().collect();
            let wd_set: BTreeSet<&String> = wd.iter().collect();
            let only_zk: Vec<&&String> = zk_set.difference(&wd_set).take(15).collect();
            let only_wd: Vec<&&String> = wd_set.difference(&zk_set).take(15).collect();
            let message = format!(
                "  the trees differ ({} nodes on ZooKeeper, {} on Warden)\n  only ZooKeeper's: {only_zk:#?}\n  only Warden's: {only_wd:#?}",
                zk.len(),
                wd.len()
            );
            return Err(self.fail(label, message));
        }
        self.summary.dumps += 1;
        self.summary.dumped_nodes += zk.len();
        // Resynchronise the generator's view with the tree.
        self.known = zk
            .iter()
            .filter_map(|line| line.split(' ').next())
            .filter(|path| self.under_root(path))
            .map(str::to_string)
            .collect();
        let known = self.known.clone();
        self.containers.retain(|c| known.contains(c));
        Ok(())
    }

    // --- the generator -----------------------------------------------------------------------

    fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.rng.usize(..items.len())].clone()
    }

    fn known_path(&mut self) -> String {
        if self.known.is_empty() {
            return self.root.clone();
        }
        let i = self.rng.usize(..self.known.len());
        self.known.iter().nth(i).unwrap().clone()
    }

    fn static_path(&mut self) -> String {
        let depth = 1 + self.rng.usize(..3);
        let mut path = self.root.clone();
        for _ in 0..depth {
            path.push('/');
            path.push_str(self.pick(&NAMES));
        }
        path
    }

    fn target_path(&mut self) -> String {
        match self.rng.u32(..100) {
            0..60 => self.known_path(),
            60..64 => self.pick(&SPECIAL_PATHS).to_string(),
            _ => self.static_path(),
        }
    }

    fn create_path(&mut self) -> String {
        match self.rng.u32(..100) {
            0..75 => {
                let parent = self.known_path();
                let name = self.pick(&NAMES);
                join_path(&parent, name)
            }
            75..78 => self
                .pick(&["/zookeeper/x", "/zookeeper/quota/x", "/zookeeper"])
                .to_string(),
            _ => self.static_path(),
        }
    }

    fn data(&mut self) -> Data {
        Data(match self.rng.u32(..100) {
            0..15 => Vec::new(),
            15..85 => format!("v{}", self.rng.u32(..1000)).into_bytes(),
            85..95 => (0..10).map(|_| self.rng.u8(..)).collect(),
            _ => (0..self.rng.usize(1000..4000))
                .map(|_| self.rng.u8(..))
                .collect(),
        })
    }

    fn version(&mut self) -> Option<i32> {
        match self.rng.u32(..100) {
            0..40 => None,
            40..50 => Some(-1),
            _ => Some(self.rng.i32(0..4)),
        }
    }

    fn acl(&mut self) -> usize {
        if self.rng.u32(..100) < 75 {
            0
        } else if readable_acls_only() {
            // Exploration knob: only ACLs that let every session read (or invalid ones), so
            // that no watch event is held back for want of READ.
            self.pick(&READABLE_ACLS)
        } else {
            self.rng.usize(..ACLS.len())
        }
    }

    /// (mode, ttl, path suffix for sequential creates)
    fn mode(&mut self) -> (CreateMode, Option<u64>) {
        match self.rng.u32(..100) {
            0..30 => (CreateMode::Persistent, None),
            30..45 => (CreateMode::Ephemeral, None),
            45..57 => (CreateMode::PersistentSequential, None),
            57..67 => (CreateMode::EphemeralSequential, None),
            67..85 => (CreateMode::Container, None),
            85..95 => (CreateMode::Persistent, Some(LONG_TTL_MS)),
            _ => (CreateMode::PersistentSequential, Some(LONG_TTL_MS)),
        }
    }

    fn create_target(&mut self, mode: CreateMode) -> String {
        if is_sequential(mode) {
            // A prefix: a child name to suffix, or a bare "parent/".
            let parent = if self.rng.bool() {
                self.known_path()
            } else {
                parent_of(&self.static_path()).to_string()
            };
            let name = if self.rng.u32(..4) == 0 { "" } else { "s-" };
            format!("{}/{name}", parent.trim_end_matches('/'))
        } else {
            self.create_path()
        }
    }

    fn watch(&mut self, pending: usize) -> bool {
        pending < MAX_ONESHOT_PER_SLOT && self.rng.u32(..100) < 40
    }

    fn live_slot(&mut self) -> usize {
        loop {
            let slot = self.rng.usize(..SLOTS);
            if self.zk.slots[slot].is_some() && !(self.zk.cut && slot == CUT_SLOT) {
                return slot;
            }
        }
    }

    fn gen_op(&mut self) -> Op {
        let slot = self.live_slot();
        let pending = self.zk.oneshot[slot].len();
        match self.rng.u32(..1000) {
            0..280 => {
                let (mode, ttl_ms) = self.mode();
                Op::Create {
                    slot,
                    path: self.create_target(mode),
                    data: self.data(),
                    mode,
                    ttl_ms,
                    acl: self.acl(),
                }
            }
            280..370 => Op::Delete {
                slot,
                // Rarely the round root itself: deleting it would empty the round.
                path: match self.rng.u32(..100) {
                    0..80 => {
                        let path = self.known_path();
                        if path == self.root && self.rng.u32(..10) != 0 {
                            self.static_path()
                        } else {
                            path
                        }
                    }
                    _ => self.target_path(),
                },
                version: self.version(),
            },
            370..460 => Op::SetData {
                slot,
                path: self.target_path(),
                data: self.data(),
                version: self.version(),
            },
            460..530 => Op::GetData {
                slot,
                path: self.target_path(),
                watch: self.watch(pending),
            },
            530..600 => Op::Exists {
                slot,
                path: self.target_path(),
                watch: self.watch(pending),
            },
            600..680 => Op::GetChildren {
                slot,
                path: self.target_path(),
                watch: self.watch(pending),
                with_stat: self.rng.bool(),
            },
            680..710 => Op::GetAcl {
                slot,
                path: self.target_path(),
            },
            710..750 => {
                // Never the root: a root nobody may read would fail the barrier, exists("/").
                let path = match self.target_path() {
                    path if path == "/" => "/zookeeper/config".to_string(),
                    path => path,
                };
                Op::SetAcl {
                    slot,
                    path,
                    acl: self.acl(),
                    version: self.version(),
                }
            }
            750..860 => {
                let n = 1 + self.rng.usize(..5);
                let mut ops = Vec::new();
                let mut made: Vec<String> = Vec::new();
                for _ in 0..n {
                    let path = if !made.is_empty() && self.rng.u32(..3) == 0 {
                        let base = self.pick(&made);
                        if self.rng.bool() {
                            base
                        } else {
                            join_path(&base, self.pick(&NAMES))
                        }
                    } else {
                        self.target_path()
                    };
                    ops.push(match self.rng.u32(..100) {
                        0..35 => {
                            let (mode, ttl_ms) = self.mode();
                            let path = if is_sequential(mode) {
                                self.create_target(mode)
                            } else {
                                path
                            };
                            made.push(path.trim_end_matches('/').to_string());
                            MultiOp::Create {
                                path,
                                data: self.data(),
                                mode,
                                ttl_ms,
                                acl: self.acl(),
                            }
                        }
                        35..60 => MultiOp::Delete {
                            path,
                            version: self.version(),
                        },
                        60..80 => MultiOp::SetData {
                            path,
                            data: self.data(),
                            version: self.version(),
                        },
                        _ => MultiOp::Check {
                            path,
                            version: self.version().unwrap_or(-1),
                        },
                    });
                }
                Op::Multi { slot, ops }
            }
            860..890 => {
                let n = 1 + self.rng.usize(..4);
                let ops = (0..n)
                    .map(|_| (self.rng.bool(), self.target_path()))
                    .collect();
                Op::MultiRead { slot, ops }
            }
            890..910 if self.zk.persistent[slot].len() < MAX_PERSISTENT_PER_SLOT => {
                let path = if self.rng.u32(..4) == 0 {
                    self.root.clone()
                } else {
                    self.target_path()
                };
                Op::AddWatch {
                    slot,
                    path,
                    recursive: self.rng.bool(),
                }
            }
            910..940 => {
                let path = match self.rng.u32(..3) {
                    0 => "/".to_string(),
                    1 => self.root.clone(),
                    _ => self.target_path(),
                };
                Op::GetEphemerals { slot, path }
            }
            940..965 => Op::CountDescendants {
                slot,
                path: self.target_path(),
            },
            965..975 => Op::Sync {
                slot,
                path: self.target_path(),
            },
            975..990 => Op::WhoAmI { slot },
            990..1000 => Op::AddAuth {
                slot,
                credentials: self.pick(&[USER1, USER2, USER3, "user1:wrong"]),
            },
            _ => Op::Exists {
                slot,
                path: self.target_path(),
                watch: false,
            },
        }
    }

    // --- session life cycle -------------------------------------------------------------------

    /// Closes the slot's session on both servers (waiting for closeSession's answer), compares
    /// what followed and opens a replacement session that authenticates later, by addAuth.
    async fn close_and_replace(&mut self, index: usize) -> Result<(), String> {
        let label = format!("op #{index} (close slot {CLOSING_SLOT}'s session)");
        self.remember(format!("#{index} close the session of slot {CLOSING_SLOT}"));
        let (zk, wd) = tokio::join!(
            self.zk.end_slot(CLOSING_SLOT),
            self.wd.end_slot(CLOSING_SLOT)
        );
        match (zk, wd) {
            (Ok(SessionState::Closed), Ok(SessionState::Closed)) => {}
            (zk, wd) => return Err(self.fail(&label, format!("  closing: {zk:?} / {wd:?}"))),
        }
        self.after_session_end(&label).await?;
        let (zk, wd) = tokio::join!(
            self.zk
                .connect_slot(CLOSING_SLOT, SESSION_TIMEOUT, &[], false),
            self.wd
                .connect_slot(CLOSING_SLOT, SESSION_TIMEOUT, &[], false)
        );
        zk.and(wd).map_err(|e| self.fail(&label, e))?;
        let op = Op::AddAuth {
            slot: CLOSING_SLOT,
            credentials: USER1,
        };
        self.step(index, &op, true).await.map(drop)
    }

    /// Drops the expiring slot's detached client (no closeSession), waits until both servers
    /// have expired the session (its ephemeral marker is gone), compares, and opens a
    /// replacement session without auth.
    async fn expire_and_replace(&mut self, index: usize) -> Result<(), String> {
        let label =
            format!("op #{index} (drop slot {EXPIRING_SLOT}'s client: the session expires)");
        self.remember(format!(
            "#{index} drop slot {EXPIRING_SLOT}'s client without closing"
        ));
        let dropped = Instant::now();
        let (zk, wd) = tokio::join!(
            self.zk.end_slot(EXPIRING_SLOT),
            self.wd.end_slot(EXPIRING_SLOT)
        );
        zk.and(wd).map_err(|e| self.fail(&label, e))?;
        let marker = self.marker();
        let gone = self.wait_until_gone(&marker, dropped, &label).await?;
        println!(
            "  round {}: the session of slot {EXPIRING_SLOT} (timeout {EXPIRING_SESSION_TIMEOUT:?}) expired {:.1?} (ZooKeeper) / {:.1?} (Warden) after its client was dropped",
            self.round, gone[0], gone[1]
        );
        self.known.remove(&marker);
        self.after_session_end(&label).await?;
        let (zk, wd) = tokio::join!(
            self.zk
                .connect_slot(EXPIRING_SLOT, SESSION_TIMEOUT, &[], false),
            self.wd
                .connect_slot(EXPIRING_SLOT, SESSION_TIMEOUT, &[], false)
        );
        zk.and(wd).map_err(|e| self.fail(&label, e))
    }

    /// A fixed case of what the random operations meet now and then: ZooKeeper (3.9.2 and
    /// later, the fix for CVE-2024-23944) delivers a watch event only to a session that may
    /// READ the node (for NodeChildrenChanged: the parent). An anonymous session leaves an
    /// exist watch on a path and a recursive watch above it; a user1 session creates the node
    /// readable by user1 only, changes it and deletes it.
    async fn read_permission_scenario(&mut self, first_index: usize) -> Result<usize, String> {
        let dir = format!("{}/secret-dir", self.root);
        let secret = format!("{dir}/secret");
        let ops = [
            Op::Create {
                slot: 1,
                path: dir.clone(),
                data: Data(Vec::new()),
                mode: CreateMode::Persistent,
                ttl_ms: None,
                acl: 0,
            },
            Op::Exists {
                slot: 0,
                path: secret.clone(),
                watch: true,
            },
            Op::AddWatch {
                slot: 0,
                path: dir.clone(),
                recursive: true,
            },
            Op::Create {
                slot: 1,
                path: secret.clone(),
                data: Data(b"s".to_vec()),
                mode: CreateMode::Persistent,
                ttl_ms: None,
                acl: 3,
            },
            Op::SetData {
                slot: 1,
                path: secret.clone(),
                data: Data(b"t".to_vec()),
                version: None,
            },
            Op::Delete {
                slot: 1,
                path: secret,
                version: None,
            },
        ];
        let mut index = first_index;
        for op in &ops {
            self.step(index, op, true).await?;
            index += 1;
        }
        Ok(index)
    }

    /// Cuts the cut slot's connection on both servers and refuses new ones: the client goes
    /// Disconnected (its persistent watchers say so) while the other slots go on.
    /// Before cutting, the cut slot watches: the round root's data and children, a node that
    /// will be deleted and one that will be created; while it is away another slot makes all
    /// four watches due.
    async fn cut_connection(&mut self, index: usize) -> Result<(), String> {
        let root = self.root.clone();
        let gone = format!("{root}/cut-gone");
        let new = format!("{root}/cut-new");
        let create = |path: &str| Op::Create {
            slot: 0,
            path: path.to_string(),
            data: Data(Vec::new()),
            mode: CreateMode::Persistent,
            ttl_ms: None,
            acl: 0,
        };
        let before = [
            create(&gone),
            Op::GetData {
                slot: CUT_SLOT,
                path: root.clone(),
                watch: true,
            },
            Op::GetChildren {
                slot: CUT_SLOT,
                path: root.clone(),
                watch: true,
                with_stat: false,
            },
            Op::GetData {
                slot: CUT_SLOT,
                path: gone.clone(),
                watch: true,
            },
            Op::Exists {
                slot: CUT_SLOT,
                path: new.clone(),
                watch: true,
            },
        ];
        for op in &before {
            self.step(index, op, true).await?;
        }
        let label = format!("op #{index} (cut slot {CUT_SLOT}'s connection)");
        self.remember(format!("#{index} cut slot {CUT_SLOT}'s connection"));
        for side in [&mut self.zk, &mut self.wd] {
            side.proxy.cut();
            side.cut = true;
        }
        self.wait_cut_slot(SessionState::Disconnected, &label)
            .await?;
        self.compare_events(&label).await?;
        let during = [
            Op::SetData {
                slot: 0,
                path: root,
                data: Data(b"changed while slot 1 was away".to_vec()),
                version: None,
            },
            Op::Delete {
                slot: 0,
                path: gone,
                version: None,
            },
            create(&new),
        ];
        for op in &during {
            self.step(index, op, true).await?;
        }
        Ok(())
    }

    /// Lets the cut slot reconnect, waits until it has its session back on both servers, and
    /// compares what it is told about what changed meanwhile (watches re-registered with
    /// setWatches fire for the changes it missed).
    async fn restore_connection(&mut self, index: usize) -> Result<(), String> {
        let label = format!("op #{index} (slot {CUT_SLOT} reconnects)");
        self.remember(format!("#{index} slot {CUT_SLOT} may reconnect"));
        for side in [&mut self.zk, &mut self.wd] {
            side.proxy.resume();
        }
        self.wait_cut_slot(SessionState::SyncConnected, &label)
            .await?;
        self.zk.cut = false;
        self.wd.cut = false;
        self.compare_events(&label).await?;
        println!(
            "  round {}: slot {CUT_SLOT} was disconnected for {CUT_OPS} operations; reconnected, it was told {:#?}",
            self.round, self.last_events
        );
        Ok(())
    }

    async fn wait_cut_slot(&mut self, state: SessionState, label: &str) -> Result<(), String> {
        let mut watchers = [
            self.zk.client(CUT_SLOT)?.state_watcher(),
            self.wd.client(CUT_SLOT)?.state_watcher(),
        ];
        let reached = tokio::time::timeout(RECONNECT_TIMEOUT, async {
            for watcher in &mut watchers {
                let mut current = watcher.peek_state();
                while current != state {
                    if current.is_terminated() {
                        return Err(current);
                    }
                    current = watcher.changed().await;
                }
            }
            Ok(())
        })
        .await;
        match reached {
            Ok(Ok(())) => Ok(()),
            other => {
                let message = format!(
                    "  slot {CUT_SLOT} did not reach {state:?} within {RECONNECT_TIMEOUT:?} ({other:?}; ZooKeeper's client {:?}, Warden's {:?})",
                    watchers[0].peek_state(),
                    watchers[1].peek_state()
                );
                Err(self.fail(label, message))
            }
        }
    }

    async fn after_session_end(&mut self, label: &str) -> Result<(), String> {
        if !self.containers.is_empty() {
            self.settle_containers(label).await?;
        }
        self.compare_events(label).await?;
        self.compare_trees(label).await
    }

    // --- time-based phase ---------------------------------------------------------------------

    /// Short-lived TTL nodes (alone, with a child, sequential), a long TTL node and a
    /// never-used container. One node expires per stage and nothing else is sent meanwhile, so
    /// both servers give the same zxids; a recursive watch and a child watch see it all.
    async fn ttl_phase(&mut self, first_index: usize) -> Result<usize, String> {
        // Beside the round root, where no random operation reaches (it may have deleted the
        // round root or locked it with an ACL).
        let t = format!("/ttl-r{}", self.round);
        let create = |path: String, mode, ttl_ms| MultiOp::Create {
            path,
            data: Data(b"x".to_vec()),
            mode,
            ttl_ms,
            acl: 0,
        };
        let mut index = first_index;
        let setup = [
            Op::Create {
                slot: 0,
                path: t.clone(),
                data: Data(Vec::new()),
                mode: CreateMode::Persistent,
                ttl_ms: None,
                acl: 0,
            },
            Op::AddWatch {
                slot: 1,
                path: t.clone(),
                recursive: true,
            },
            Op::GetChildren {
                slot: 2,
                path: t.clone(),
                watch: true,
                with_stat: true,
            },
        ];
        for op in &setup {
            self.step(index, op, true).await?;
            index += 1;
        }
        // From here on a server may expire a node at any moment: answers are compared at once,
        // events only when the stage has settled.
        let short = Some(SHORT_TTL_MS);
        let stages = [
            (
                Op::Multi {
                    slot: 0,
                    ops: vec![
                        create(format!("{t}/parent"), CreateMode::Persistent, short),
                        create(format!("{t}/parent/kid"), CreateMode::Persistent, None),
                        create(
                            format!("{t}/long"),
                            CreateMode::Persistent,
                            Some(LONG_TTL_MS),
                        ),
                        create(format!("{t}/box"), CreateMode::Container, None),
                        create(format!("{t}/short"), CreateMode::Persistent, short),
                    ],
                },
                "a TTL node without children",
            ),
            (
                Op::Create {
                    slot: 1,
                    path: format!("{t}/seq-"),
                    data: Data(b"x".to_vec()),
                    mode: CreateMode::PersistentSequential,
                    ttl_ms: short,
                    acl: 0,
                },
                "a sequential TTL node",
            ),
            (
                Op::Delete {
                    slot: 0,
                    path: format!("{t}/parent/kid"),
                    version: None,
                },
                "a TTL node whose only child went (its mtime is long past)",
            ),
        ];
        for (op, what) in stages {
            let effect = self.step(index, &op, false).await?;
            index += 1;
            let expiring = match &op {
                Op::Multi { .. } => format!("{t}/short"),
                Op::Create { .. } => match effect.created.first() {
                    Some((path, _)) => path.clone(),
                    None => return Err(self.fail(what, "  the TTL node was not created".into())),
                },
                _ => format!("{t}/parent"),
            };
            let since = Instant::now();
            let label = format!("TTL phase: waiting for {what} to expire");
            self.wait_until_gone(&expiring, since, &label).await?;
            // Anything else that was going to be deleted has had three more checks.
            tokio::time::sleep(Duration::from_millis(3 * CHECK_INTERVAL_MS)).await;
            let label = format!("TTL phase: {what} expired");
            self.compare_events(&label).await?;
            self.compare_trees(&label).await?;
            self.summary.ttl_expired += 1;
        }
        Ok(index)
    }

    /// Waits until `path` is gone on both servers; how long after `since` each took.
    async fn wait_until_gone(
        &mut self,
        path: &str,
        since: Instant,
        label: &str,
    ) -> Result<[Duration; 2], String> {
        let deadline = Instant::now() + CLEANUP_TIMEOUT;
        let mut gone = [None, None];
        loop {
            let zk = match gone[0] {
                None => Some(self.zk.probe(path).await),
                Some(_) => None,
            };
            let wd = match gone[1] {
                None => Some(self.wd.probe(path).await),
                Some(_) => None,
            };
            for (i, probe) in [zk, wd].into_iter().enumerate() {
                match probe {
                    Some(Ok(Probe::Gone)) => gone[i] = Some(since.elapsed()),
                    Some(Err(e)) => return Err(self.fail(label, e)),
                    _ => {}
                }
            }
            if let [Some(zk), Some(wd)] = gone {
                self.known.remove(path);
                self.remember(format!(
                    "  ({path} gone: ZooKeeper after {zk:.1?}, Warden after {wd:.1?})"
                ));
                return Ok([zk, wd]);
            }
            if Instant::now() > deadline {
                let message = format!(
                    "  {path} was not deleted by both servers within {CLEANUP_TIMEOUT:?} (gone on ZooKeeper after {:?}, on Warden after {:?})",
                    gone[0], gone[1]
                );
                return Err(self.fail(label, message));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    // --- the round ----------------------------------------------------------------------------

    async fn run(&mut self, ops: usize, last_round: bool) -> Result<(), String> {
        // Sessions: slot 0 anonymous, slot 1 user1, slot 2 user2 (closed part-way), slot 3
        // user1+user2 with a short timeout, detached (expires part-way).
        let setups: [(&[&str], Duration, bool); SLOTS] = [
            (&[], SESSION_TIMEOUT, false),
            (&[USER1], SESSION_TIMEOUT, false),
            (&[USER2], SESSION_TIMEOUT, false),
            (&[USER1, USER2], EXPIRING_SESSION_TIMEOUT, true),
        ];
        for (slot, (auths, timeout, detached)) in setups.into_iter().enumerate() {
            let (zk, wd) = tokio::join!(
                self.zk.connect_slot(slot, timeout, auths, detached),
                self.wd.connect_slot(slot, timeout, auths, detached)
            );
            zk.and(wd).map_err(|e| self.fail("setup", e))?;
            let (zk, wd) = (
                self.zk.slots[slot].as_ref().unwrap().session_timeout(),
                self.wd.slots[slot].as_ref().unwrap().session_timeout(),
            );
            if zk != wd {
                let message = format!(
                    "  negotiated session timeout for {timeout:?}: ZooKeeper {zk:?}, Warden {wd:?}"
                );
                return Err(self.fail("setup", message));
            }
        }
        // The round root: its zxid is the base all other zxids are compared against.
        let root_op = Op::Create {
            slot: 0,
            path: self.root.clone(),
            data: Data(b"round".to_vec()),
            mode: CreateMode::Persistent,
            ttl_ms: None,
            acl: 0,
        };
        let options = create_options(CreateMode::Persistent, None, 0);
        let (zk_client, wd_client) = (self.zk.client(0)?, self.wd.client(0)?);
        let (zk, wd) = tokio::join!(
            timed(
                "ZooKeeper: create the round root",
                zk_client.create(&self.root, b"round", &options)
            ),
            timed(
                "Warden: create the round root",
                wd_client.create(&self.root, b"round", &options)
            )
        );
        drop((zk_client, wd_client));
        let (zk, wd) = (zk?, wd?);
        match (zk, wd) {
            (Ok((zk, _)), Ok((wd, _))) => {
                self.zk.base = zk.czxid;
                self.wd.base = wd.czxid;
                let (zk, wd) = (self.zk.stat(&self.root, &zk), self.wd.stat(&self.root, &wd));
                self.remember(format!("#setup {root_op:?} => {zk}"));
                if zk != wd {
                    return Err(
                        self.fail("setup", format!("  creating the round root: {zk} / {wd}"))
                    );
                }
            }
            (zk, wd) => {
                return Err(self.fail(
                    "setup",
                    format!("  creating the round root: {zk:?} / {wd:?}"),
                ));
            }
        }
        self.known.insert(self.root.clone());
        // The expiring session's ephemeral marker tells when the session has expired.
        let marker = Op::Create {
            slot: EXPIRING_SLOT,
            path: self.marker(),
            data: Data(Vec::new()),
            mode: CreateMode::Ephemeral,
            ttl_ms: None,
            acl: 0,
        };
        self.step(0, &marker, true).await?;
        let whoami: Vec<Op> = (0..SLOTS).map(|slot| Op::WhoAmI { slot }).collect();
        for op in &whoami {
            self.step(0, op, true).await?;
        }
        // The super user's identities.
        let (zk, wd) = tokio::join!(
            self.zk.observer.list_auth_users(),
            self.wd.observer.list_auth_users()
        );
        let show = |users: Result<Vec<zookeeper_client::AuthUser>, zookeeper_client::Error>| {
            users.map(|users| {
                let mut users: Vec<String> = users
                    .iter()
                    .map(|u| format!("{}:{}", u.scheme(), u.user()))
                    .collect();
                users.sort();
                users
            })
        };
        let (zk, wd) = (show(zk), show(wd));
        self.remember(format!("#0 whoAmI on the super-user session => {zk:?}"));
        if zk != wd {
            let message = format!("  whoAmI as super: ZooKeeper {zk:?}, Warden {wd:?}");
            self.soft(
                "answer to whoAmI as super".into(),
                "op #0 (whoAmI as super)",
                message,
            );
        }
        if self.round == 0 && !readable_acls_only() {
            self.read_permission_scenario(0).await?;
        }
        let close_at = ops * 2 / 5;
        let cut_at = ops / 2;
        let expire_at = ops * 7 / 10;
        for index in 1..=ops {
            if index == cut_at {
                self.cut_connection(index).await?;
            }
            if index == cut_at + CUT_OPS {
                self.restore_connection(index).await?;
            }
            if index == close_at {
                self.close_and_replace(index).await?;
            }
            if index == expire_at {
                self.expire_and_replace(index).await?;
            }
            let op = self.gen_op();
            self.step(index, &op, true).await?;
            if index % DUMP_EVERY == 0 {
                self.compare_trees(&format!("tree after op #{index}"))
                    .await?;
            }
        }
        if self.zk.cut {
            self.restore_connection(ops).await?;
        }
        self.compare_trees("tree at the end of the random phase")
            .await?;
        let next = self.ttl_phase(ops + 1).await?;

        // One session at a time, each time waiting for the containers its ephemerals emptied,
        // so that the next closeSession does not race their deletion.
        for slot in 0..SLOTS {
            let label = format!("closing slot {slot}'s session at the end of the round");
            let (zk, wd) = tokio::join!(self.zk.end_slot(slot), self.wd.end_slot(slot));
            match (zk, wd) {
                (Ok(SessionState::Closed), Ok(SessionState::Closed)) => {}
                (zk, wd) => return Err(self.fail(&label, format!("  closing: {zk:?} / {wd:?}"))),
            }
            if !self.containers.is_empty() {
                self.settle_containers(&label).await?;
            }
            self.compare_events(&label).await?;
        }
        self.compare_trees("after closing the sessions").await?;
        if last_round {
            self.oversized_requests().await?;
            self.auth_failure(next).await?;
        }
        Ok(())
    }

    /// addAuth with a scheme no server knows fails authentication; both servers then drop the
    /// connection. Done last: the session then expires on its own schedule, a transaction at
    /// a time of each server's choosing.
    async fn auth_failure(&mut self, index: usize) -> Result<(), String> {
        let (zk, wd) = tokio::join!(
            auth_failure(&self.zk.address),
            auth_failure(&self.wd.address)
        );
        let label = format!("op #{index} (addAuth with an unknown scheme)");
        self.remember(format!(
            "#{index} addAuth(\"nosuch\") on a fresh session => {zk:?}"
        ));
        if zk != wd {
            return Err(self.fail(&label, format!("  ZooKeeper: {zk:?}\n  Warden:    {wd:?}")));
        }
        Ok(())
    }

    /// Requests just under and just over ZooKeeper's default jute.maxbuffer (0xfffff bytes
    /// for a whole request), on a session of their own; last, since a server that refuses one
    /// drops the connection.
    async fn oversized_requests(&mut self) -> Result<(), String> {
        let path = format!("/big-r{}", self.round);
        let (zk, wd) = tokio::join!(
            oversized(&self.zk.address, &path),
            oversized(&self.wd.address, &path)
        );
        let label = "setData with about 1 MiB of data (ZooKeeper's jute.maxbuffer)";
        self.remember(format!("{label} => {zk:?}"));
        println!("  {label}: {zk:#?}");
        if zk != wd {
            return Err(self.fail(label, format!("  ZooKeeper: {zk:?}\n  Warden:    {wd:?}")));
        }
        self.compare_trees(label).await
    }
}

/// Creates `path` and sets ever larger data on it from one session; what each answer was, and
/// what the session saw afterwards.
async fn oversized(address: &str, path: &str) -> Result<Vec<String>, String> {
    let client = connect(address, SESSION_TIMEOUT, &[], false).await?;
    let mut answers = Vec::new();
    let created = timed(
        "create",
        client.create(path, b"", &create_options(CreateMode::Persistent, None, 0)),
    )
    .await?;
    answers.push(format!("create: {:?}", created.map(|_| ())));
    // The request adds about 40 bytes of header, path and version to the data.
    for size in [1_000_000, 0xfffff + 1] {
        let data = vec![b'x'; size];
        let result = timed("setData", client.set_data(path, &data, None)).await?;
        let mut state = client.state_watcher();
        let reconnected = timed("reconnecting", async {
            let mut current = state.peek_state();
            while current != SessionState::SyncConnected && !current.is_terminated() {
                current = state.changed().await;
            }
            current
        })
        .await?;
        let after = timed("getData", client.check_stat(path)).await?;
        // A server that refuses the request closes the connection: the client sees either
        // the end of the stream or, if the server closed it before the client had written the
        // whole request, a broken pipe. Which one is a matter of timing.
        let result = match result {
            Ok(stat) => format!("ok, dataLength {}", stat.data_length),
            Err(zookeeper_client::Error::ConnectionLoss | zookeeper_client::Error::Custom(_)) => {
                "connection closed by the server".to_string()
            }
            Err(e) => format!("{e:?}"),
        };
        answers.push(format!(
            "setData of {size} bytes: {result}; session {reconnected:?}; then exists: {:?}",
            after.map(|stat| stat.map(|stat| stat.data_length))
        ));
    }
    close(client).await?;
    Ok(answers)
}

/// addAuth with a scheme no server knows, on a fresh session: the answer and the session's
/// state afterwards.
async fn auth_failure(address: &str) -> Result<String, String> {
    let client = connect(address, SESSION_TIMEOUT, &[], false).await?;
    let answer = timed("addAuth nosuch", client.auth("nosuch", b"x")).await?;
    let next = timed("exists after a failed auth", client.check_stat("/")).await?;
    let state = client.state_watcher().peek_state();
    drop(client);
    Ok(format!(
        "auth: {answer:?}; then exists(/): {next:?}; state {state:?}"
    ))
}

/// Asks for session timeouts outside [min, max] and compares what each server grants.
async fn negotiated_timeouts(zk: &str, wd: &str) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    for asked in [Duration::from_millis(300), Duration::from_secs(100)] {
        let mut granted = Vec::new();
        for address in [zk, wd] {
            let client = connect(address, asked, &[], false).await?;
            granted.push(client.session_timeout());
            close(client).await?;
        }
        if granted[0] != granted[1] {
            return Err(format!(
                "MISMATCH: session timeout granted for {asked:?}: ZooKeeper {:?}, Warden {:?}",
                granted[0], granted[1]
            ));
        }
        lines.push(format!("asked {asked:?} → granted {:?}", granted[0]));
    }
    Ok(lines)
}

fn settings() -> (Vec<u64>, usize) {
    let seeds = match std::env::var("WARDEN_DIFF_SEEDS") {
        Ok(value) if value == "random" => (0..DEFAULT_SEEDS.len())
            .map(|_| fastrand::u64(..))
            .collect(),
        Ok(value) => value
            .split(',')
            .map(|s| {
                let s = s.trim();
                match s.strip_prefix("0x") {
                    Some(hex) => u64::from_str_radix(hex, 16),
                    None => s.parse(),
                }
                .unwrap_or_else(|_| panic!("WARDEN_DIFF_SEEDS: bad seed {s:?}"))
            })
            .collect(),
        Err(_) => DEFAULT_SEEDS.to_vec(),
    };
    let ops = std::env::var("WARDEN_DIFF_OPS")
        .ok()
        .map(|v| v.parse().expect("WARDEN_DIFF_OPS: a number"))
        .unwrap_or(DEFAULT_OPS);
    (seeds, ops)
}

async fn run_all(
    servers: &mut [ServerProcess; 2],
    seeds: &[u64],
    ops: usize,
) -> Result<Vec<String>, String> {
    let (zk_address, wd_address) = (servers[0].address(), servers[1].address());
    let mut report = negotiated_timeouts(&zk_address, &wd_address).await?;
    let mut mismatches = Vec::new();
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for (round, &seed) in seeds.iter().enumerate() {
        let started = Instant::now();
        println!("round {round}: seed {seed:#x}, {ops} random operations");
        let zk = Side::open("ZooKeeper", zk_address.clone(), &[]).await?;
        let wd = Side::open("Warden", wd_address.clone(), &["keeper"]).await?;
        let mut round_state = Round {
            seed,
            round,
            root: format!("/r{round}"),
            rng: fastrand::Rng::with_seed(seed),
            zk,
            wd,
            known: BTreeSet::new(),
            containers: BTreeSet::new(),
            history: VecDeque::new(),
            summary: Summary::default(),
            soft: Vec::new(),
            soft_shown: soft_mismatches_shown().saturating_sub(mismatches.len()),
            soft_kinds: BTreeMap::new(),
            last_events: Vec::new(),
            servers: &mut *servers,
        };
        let result = round_state.run(ops, round + 1 == seeds.len()).await;
        mismatches.append(&mut round_state.soft);
        for (kind, count) in std::mem::take(&mut round_state.soft_kinds) {
            *kinds.entry(kind).or_default() += count;
        }
        if let Err(hard) = result {
            mismatches.push(hard);
            *kinds
                .entry("stopped the test (see the last message)".into())
                .or_default() += 1;
            return Err(mismatch_report(&mismatches, &kinds));
        }
        let Round {
            summary, zk, wd, ..
        } = round_state;
        for side in [zk, wd] {
            close(side.observer).await?;
        }
        report.push(format!(
            "round {round} (seed {seed:#x}): {} operations compared, {} watch events, {} tree comparisons ({} nodes), {} containers and {} TTL nodes cleaned up by both, in {:.1?}",
            summary.ops,
            summary.events,
            summary.dumps,
            summary.dumped_nodes,
            summary.containers_cleaned,
            summary.ttl_expired,
            started.elapsed()
        ));
        if round == 0 {
            report.push("outcomes of round 0 (operation → answer: count):".into());
            for (outcome, count) in &summary.outcomes {
                report.push(format!("  {outcome}: {count}"));
            }
        }
    }
    if !mismatches.is_empty() {
        for line in &report {
            println!("{line}");
        }
        return Err(mismatch_report(&mismatches, &kinds));
    }
    Ok(report)
}

fn mismatch_report(mismatches: &[String], kinds: &BTreeMap<String, usize>) -> String {
    let total: usize = kinds.values().sum();
    let mut text = format!("{total} mismatch(es) between ZooKeeper 3.9.5 and Warden:\n");
    for (kind, count) in kinds {
        text.push_str(&format!("  {count} × {kind}\n"));
    }
    text.push_str(&format!(
        "The first {} (WARDEN_DIFF_MAX_MISMATCHES shows more):\n\n{}",
        mismatches.len(),
        mismatches.join("\n")
    ));
    text
}

#[test]
fn warden_answers_like_zookeeper() {
    let started = Instant::now();
    if let Ok(filter) = std::env::var("WARDEN_DIFF_TRACE") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .init();
    }
    let (seeds, ops) = settings();
    println!("differential test: seeds {seeds:x?}, {ops} operations per round");
    let body = zoo_cfg_body();
    let mut servers = [
        spawn_zookeeper(&body, &zookeeper_jvm_opts()),
        spawn_warden(&body),
    ];
    for server in servers.iter_mut() {
        if let Err(e) = server.wait_until_serving(START_TIMEOUT) {
            panic!("{e}");
        }
    }
    println!(
        "ZooKeeper (pid {}) on {} and Warden (pid {}) on {} serving after {:.1?}",
        servers[0].pid(),
        servers[0].address(),
        servers[1].pid(),
        servers[1].address(),
        started.elapsed()
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let budget = TEST_BUDGET.saturating_sub(started.elapsed());
    let outcome = runtime
        .block_on(async { tokio::time::timeout(budget, run_all(&mut servers, &seeds, ops)).await });
    runtime.shutdown_timeout(Duration::from_secs(2));
    match outcome {
        Err(_) => panic!(
            "the differential test overran its budget of {TEST_BUDGET:?} (seeds {seeds:x?})\nZooKeeper log:\n{}\nWarden log:\n{}",
            servers[0].log_tail(20),
            servers[1].log_tail(20)
        ),
        Ok(Err(mismatch)) => panic!("{mismatch}"),
        Ok(Ok(report)) => {
            for line in report {
                println!("{line}");
            }
            println!("total {:.1?}", started.elapsed());
        }
    }
}
