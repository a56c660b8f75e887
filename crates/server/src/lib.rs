//! The Warden server process, usable embedded or from the `warden` binary.
//!
//! The path of a request: [`server`] accepts a connection; [`connection`] reads its frames
//! (size-capped), does the handshake and hands each request on, writes to [`consensus`] and
//! the rest to the [`replica`]; the replica applies committed transactions and answers reads
//! under one lock and queues every reply and watch event on the client's [`outbound`] queue,
//! which the connection's writer task drains.
//!
//! - [`config`]: [`Config`], every knob and bound of the server with its default, read from
//!   Warden's own TOML and checked as a whole.
//! - [`zoo_cfg`]: ZooKeeper's zoo.cfg (and myid file) read into a [`Config`], as ZooKeeper 3.9
//!   reads it, with a warning for each key not taken as written.
//! - [`server`]: start-up, the client listener and its limits, the duties that follow
//!   leadership (session expiry, container and TTL cleanup on the leader; session reports to
//!   it from followers; closing clients when not serving), shutdown.
//! - [`connection`]: one client connection: handshake, request dispatch, bad-input handling.
//! - [`auth`]: SASL DIGEST-MD5 and the JAAS file its users come from.
//! - [`tls`]: TLS for clients: the secure port, port unification, key and trust stores, the
//!   `x509` identity, stores reloaded when their files change.
//! - [`replica`]: the state, this server's watches and clients; apply, reads, ordering.
//! - [`writes`]: one connection's writes on their way into the log, handed to the next leader
//!   when a change of leader lost them.
//! - [`sessions`]: the session tracker: deadlines, touches, expiry.
//! - [`cluster`]: the peer protocol, the peer listener, and followers' writes forwarded to the
//!   leader.
//! - [`outbound`]: a client's byte-bounded queue of replies and events.
//! - [`consensus`]: openraft, the durable log and snapshots.
//! - [`admin`]: the four-letter words and the admin HTTP server (ZooKeeper's AdminServer
//!   commands, `/ready`, `/health`, the web console), drawn from the same facts.
//! - [`stats`]: counters for the admin commands.
//! - [`throttle`]: the rate at which sessions are let in.
//! - [`observer`]: the leader following a running ZooKeeper ensemble as its observer,
//!   mirroring it through the log until promoted (online migration).
//! - [`embed`]: a server or a cluster of several inside a host program or a test, on free
//!   ports and temporary data.

pub mod admin;
pub mod auth;
pub mod cluster;
pub mod config;
pub mod connection;
pub mod consensus;
pub mod embed;
pub mod observer;
pub mod outbound;
pub mod replica;
pub mod server;
pub mod sessions;
pub mod stats;
pub mod throttle;
pub mod tls;
pub mod writes;
pub mod zoo_cfg;

pub use config::{Config, ConfigError};
pub use server::{SeedError, Server, StartError, preflight, seed_data_dir};
pub use zoo_cfg::Warning;
