//! Warden's replicated state machine: pure and deterministic. It reads no clock, no random
//! numbers, no files and no sockets; time and identities arrive inside each [`Txn`].
//!
//! - [`tree`]: the data tree, an arena of znodes with a (parent, name) hash index, ephemeral,
//!   container and TTL bookkeeping, and an incremental digest.
//! - `arena`: the copy-on-write chunked array the tree keeps its nodes in, so that a clone
//!   of the state (a snapshot's) is cheap.
//! - `children`: where a parent's children are kept: a short list in its node, a long one
//!   chunked, with each child's place so that a delete takes it out in constant time.
//! - `sharded_table`: the hash table of the tree's large indexes, copy-on-write by shard and
//!   grown a few buckets per write.
//! - [`path`]: ZooKeeper's path rules.
//! - [`acl`]: schemes, permission checks, ACL fix-up, interned ACL lists.
//! - [`prepare`]: validation of writes against the tree as a multi's earlier operations leave
//!   it, producing changes that cannot fail.
//! - [`quota`]: ZooKeeper's quotas: the limits and stats nodes, their text, the quota roots.
//! - [`state`]: [`State`], the tree plus sessions and the zxid counter; `apply(txn)`.
//! - [`read`]: reads and the watches they leave.
//! - [`watch`]: the per-server watch registry and which events each change fires.
//! - [`system`]: /zookeeper and ClickHouse Keeper's /keeper nodes.
//! - [`mirror`]: a running ZooKeeper ensemble mirrored (its tree, its transactions) until
//!   Warden is promoted.
//! - [`restore`]: a state rebuilt from ZooKeeper's snapshot and transaction log, replayed as
//!   ZooKeeper replays them.
//! - [`snapshot`]: the whole state to a checksummed, compressed byte stream and back.
//! - [`txn`]: transactions and their outcomes.

pub mod acl;
mod arena;
mod children;
pub mod mirror;
pub mod path;
pub mod prepare;
pub mod quota;
pub mod read;
pub mod restore;
mod sharded_table;
pub mod snapshot;
pub mod state;
pub mod system;
pub mod tree;
pub mod txn;
pub mod watch;

pub use read::{ReadOutcome, WatchRequest};
pub use state::{Session, State, StateConfig};
pub use txn::{Outcome, Trigger, Txn, TxnKind};
pub use watch::{Delivery, WatchKind, WatchRegistry};
