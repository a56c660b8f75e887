//! Everything an operator asks a running server: the four-letter words on the client port,
//! the admin HTTP server (ZooKeeper's AdminServer commands, `/ready`, `/health`) and the
//! Prometheus metrics endpoint, all drawn from the same facts.
//!
//! - [`facts`]: what the words and commands report, gathered from the replica and consensus.
//! - [`families`]: ZooKeeper's metrics provider's families, for `/metrics` and the end of
//!   `mntr` and `monitor`.
//! - [`four_letter`]: the words, in ZooKeeper 3.9's text.
//! - [`commands`]: ZooKeeper 3.9's command table and each command's JSON.
//! - [`snapshots`]: the `snapshot` and `restore` commands: ZooKeeper's snapshot format out
//!   and in, through the log.
//! - [`json`]: JSON as ZooKeeper's Jackson writes it, keys in order.
//! - [`http`]: the HTTP listener and its routes.
//! - [`console`]: the web console under `/console`: the tree, sessions, the cluster, live
//!   charts; writes through the normal request path.
//! - [`metrics`]: `/metrics`, ZooKeeper's Prometheus families and Warden's own.
//! - [`process`]: the process as `/proc` shows it (memory, CPU, file descriptors).

pub mod commands;
pub mod console;
pub mod facts;
pub mod families;
pub mod four_letter;
pub mod http;
pub mod json;
pub mod metrics;
pub mod process;
pub mod snapshots;

pub use facts::mode;
pub use four_letter::answer;

/// The version Warden reports: the ZooKeeper release whose protocol and semantics it
/// implements, then its own. Clients parse the leading digits to enable features.
pub const ZOOKEEPER_VERSION: &str = concat!(
    "3.9.5-warden-",
    env!("CARGO_PKG_VERSION"),
    ", built on 1970-01-01 00:00 UTC"
);
