//! The ZooKeeper wire protocol, and nothing else: no IO, no async, no state.
//!
//! - [`frame`]: the 4-byte length prefix, checked against a maximum before anything is read,
//!   and the four-letter words that share the client port.
//! - [`jute`]: ZooKeeper's record encoding (big-endian ints, length-prefixed strings, buffers
//!   and vectors) with a bounds-checked [`jute::Reader`] and a [`jute::Writer`].
//! - [`types`]: Stat, ACLs, opcodes, create modes, error codes, watch events.
//! - [`request`]: the handshake and every request body, one [`request::Request`] variant per
//!   opcode (ZooKeeper 3.9 and ClickHouse Keeper's extensions).
//! - [`response`]: the handshake answer and every reply body, multi results, notifications.
//! - [`quorum`]: ZooKeeper's quorum packets and the observer's side of their handshake, for
//!   following a ZooKeeper ensemble (docs/migration.md).
//!
//! Decoding any byte sequence yields a value or a [`jute::DecodeError`]: never a panic, and
//! never an allocation larger than the input.

pub mod frame;
pub mod jute;
pub mod names;
pub mod quorum;
pub mod request;
pub mod response;
pub mod types;

pub use jute::{DecodeError, Reader, Record, Writer};
pub use names::Names;
pub use request::{ConnectRequest, Request, RequestHeader};
pub use response::{ConnectResponse, OpResult, ReplyHeader, Response};
pub use types::{Acl, CreateMode, ErrorCode, EventType, Id, OpCode, Stat, WatcherEvent};
