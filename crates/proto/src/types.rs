//! The small value types of the protocol: Stat, ACLs, opcodes, create modes, error codes and
//! watch events.

use crate::jute::{DecodeError, MinEncodedLen, Reader, Record, Writer, record};

record! {
    /// A znode's metadata, 68 bytes on the wire.
    #[derive(Copy, Hash)]
    pub struct Stat {
        pub czxid: i64,
        pub mzxid: i64,
        pub ctime: i64,
        pub mtime: i64,
        pub version: i32,
        pub cversion: i32,
        pub aversion: i32,
        pub ephemeral_owner: i64,
        pub data_length: i32,
        pub num_children: i32,
        pub pzxid: i64,
    }
}

impl Stat {
    pub const ENCODED_LEN: usize = 68;
}

record! {
    /// An identity in an ACL scheme, e.g. `world:anyone` or `digest:user:hash`.
    #[derive(Hash, PartialOrd, Ord)]
    pub struct Id {
        pub scheme: String,
        pub id: String,
    }
}

impl Id {
    pub fn new(scheme: impl Into<String>, id: impl Into<String>) -> Self {
        Id {
            scheme: scheme.into(),
            id: id.into(),
        }
    }
}

record! {
    /// Permissions granted to an identity.
    #[derive(Hash, PartialOrd, Ord)]
    pub struct Acl {
        pub perms: i32,
        pub id: Id,
    }
}

impl MinEncodedLen for Acl {
    const MIN_ENCODED_LEN: usize = 12;
}

/// ZooKeeper's permission bits (`ZooDefs.Perms`).
pub mod perms {
    pub const READ: i32 = 1;
    pub const WRITE: i32 = 2;
    pub const CREATE: i32 = 4;
    pub const DELETE: i32 = 8;
    pub const ADMIN: i32 = 16;
    pub const ALL: i32 = READ | WRITE | CREATE | DELETE | ADMIN;
}

impl Acl {
    /// `world:anyone` with every permission (`ZooDefs.Ids.OPEN_ACL_UNSAFE`).
    pub fn open() -> Vec<Acl> {
        vec![Acl {
            perms: perms::ALL,
            id: Id::new("world", "anyone"),
        }]
    }

    /// `world:anyone` with read only (`ZooDefs.Ids.READ_ACL_UNSAFE`).
    pub fn read_only() -> Vec<Acl> {
        vec![Acl {
            perms: perms::READ,
            id: Id::new("world", "anyone"),
        }]
    }
}

record! {
    /// An identity a session authenticated as, reported by whoAmI.
    pub struct ClientInfo {
        pub auth_scheme: String,
        pub user: String,
    }
}

impl MinEncodedLen for ClientInfo {
    const MIN_ENCODED_LEN: usize = 8;
}

/// Operation codes (`ZooDefs.OpCode`) and ClickHouse Keeper's extensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i32)]
pub enum OpCode {
    Notification = 0,
    Create = 1,
    Delete = 2,
    Exists = 3,
    GetData = 4,
    SetData = 5,
    GetAcl = 6,
    SetAcl = 7,
    GetChildren = 8,
    Sync = 9,
    Ping = 11,
    GetChildren2 = 12,
    Check = 13,
    Multi = 14,
    Create2 = 15,
    Reconfig = 16,
    CheckWatches = 17,
    RemoveWatches = 18,
    CreateContainer = 19,
    DeleteContainer = 20,
    CreateTtl = 21,
    MultiRead = 22,
    Auth = 100,
    SetWatches = 101,
    Sasl = 102,
    GetEphemerals = 103,
    GetAllChildrenNumber = 104,
    SetWatches2 = 105,
    AddWatch = 106,
    WhoAmI = 107,
    CreateSession = -10,
    CloseSession = -11,
    Error = -1,
    FilteredList = 500,
    CheckNotExists = 501,
    CreateIfNotExists = 502,
    RemoveRecursive = 503,
    CheckStat = 504,
    TryRemove = 505,
    FilteredListWithStatsAndData = 506,
    ListRecursive = 507,
}

impl OpCode {
    pub const ALL: [OpCode; 41] = [
        OpCode::Notification,
        OpCode::Create,
        OpCode::Delete,
        OpCode::Exists,
        OpCode::GetData,
        OpCode::SetData,
        OpCode::GetAcl,
        OpCode::SetAcl,
        OpCode::GetChildren,
        OpCode::Sync,
        OpCode::Ping,
        OpCode::GetChildren2,
        OpCode::Check,
        OpCode::Multi,
        OpCode::Create2,
        OpCode::Reconfig,
        OpCode::CheckWatches,
        OpCode::RemoveWatches,
        OpCode::CreateContainer,
        OpCode::DeleteContainer,
        OpCode::CreateTtl,
        OpCode::MultiRead,
        OpCode::Auth,
        OpCode::SetWatches,
        OpCode::Sasl,
        OpCode::GetEphemerals,
        OpCode::GetAllChildrenNumber,
        OpCode::SetWatches2,
        OpCode::AddWatch,
        OpCode::WhoAmI,
        OpCode::CreateSession,
        OpCode::CloseSession,
        OpCode::Error,
        OpCode::FilteredList,
        OpCode::CheckNotExists,
        OpCode::CreateIfNotExists,
        OpCode::RemoveRecursive,
        OpCode::CheckStat,
        OpCode::TryRemove,
        OpCode::FilteredListWithStatsAndData,
        OpCode::ListRecursive,
    ];

    pub fn from_i32(v: i32) -> Option<OpCode> {
        OpCode::ALL.iter().copied().find(|op| *op as i32 == v)
    }

    pub fn decode(r: &mut Reader<'_>) -> Result<OpCode, DecodeError> {
        let v = r.read_i32()?;
        OpCode::from_i32(v).ok_or(DecodeError::UnknownOpCode(v))
    }

    pub fn encode(self, w: &mut Writer) {
        w.write_i32(self as i32)
    }
}

/// How a znode is created (`CreateMode`), from the request's flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CreateMode {
    Persistent,
    Ephemeral,
    PersistentSequential,
    EphemeralSequential,
    Container,
    PersistentWithTtl,
    PersistentSequentialWithTtl,
}

impl CreateMode {
    /// `CreateMode.fromFlag`; an unknown flag is a BadArguments answer, not a decode error.
    pub fn from_flags(flags: i32) -> Option<CreateMode> {
        Some(match flags {
            0 => CreateMode::Persistent,
            1 => CreateMode::Ephemeral,
            2 => CreateMode::PersistentSequential,
            3 => CreateMode::EphemeralSequential,
            4 => CreateMode::Container,
            5 => CreateMode::PersistentWithTtl,
            6 => CreateMode::PersistentSequentialWithTtl,
            _ => return None,
        })
    }

    pub fn flags(self) -> i32 {
        match self {
            CreateMode::Persistent => 0,
            CreateMode::Ephemeral => 1,
            CreateMode::PersistentSequential => 2,
            CreateMode::EphemeralSequential => 3,
            CreateMode::Container => 4,
            CreateMode::PersistentWithTtl => 5,
            CreateMode::PersistentSequentialWithTtl => 6,
        }
    }

    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential
                | CreateMode::EphemeralSequential
                | CreateMode::PersistentSequentialWithTtl
        )
    }

    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }

    pub fn is_ttl(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentWithTtl | CreateMode::PersistentSequentialWithTtl
        )
    }
}

/// A ZooKeeper result code (`KeeperException.Code`). A newtype rather than an enum so that a
/// code this build does not know still round-trips.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ErrorCode(pub i32);

impl ErrorCode {
    pub const OK: ErrorCode = ErrorCode(0);
    pub const SYSTEM_ERROR: ErrorCode = ErrorCode(-1);
    pub const RUNTIME_INCONSISTENCY: ErrorCode = ErrorCode(-2);
    pub const DATA_INCONSISTENCY: ErrorCode = ErrorCode(-3);
    pub const CONNECTION_LOSS: ErrorCode = ErrorCode(-4);
    pub const MARSHALLING_ERROR: ErrorCode = ErrorCode(-5);
    pub const UNIMPLEMENTED: ErrorCode = ErrorCode(-6);
    pub const OPERATION_TIMEOUT: ErrorCode = ErrorCode(-7);
    pub const BAD_ARGUMENTS: ErrorCode = ErrorCode(-8);
    pub const UNKNOWN_SESSION: ErrorCode = ErrorCode(-12);
    pub const NEW_CONFIG_NO_QUORUM: ErrorCode = ErrorCode(-13);
    pub const RECONFIG_IN_PROGRESS: ErrorCode = ErrorCode(-14);
    pub const API_ERROR: ErrorCode = ErrorCode(-100);
    pub const NO_NODE: ErrorCode = ErrorCode(-101);
    pub const NO_AUTH: ErrorCode = ErrorCode(-102);
    pub const BAD_VERSION: ErrorCode = ErrorCode(-103);
    pub const NO_CHILDREN_FOR_EPHEMERALS: ErrorCode = ErrorCode(-108);
    pub const NODE_EXISTS: ErrorCode = ErrorCode(-110);
    pub const NOT_EMPTY: ErrorCode = ErrorCode(-111);
    pub const SESSION_EXPIRED: ErrorCode = ErrorCode(-112);
    pub const INVALID_CALLBACK: ErrorCode = ErrorCode(-113);
    pub const INVALID_ACL: ErrorCode = ErrorCode(-114);
    pub const AUTH_FAILED: ErrorCode = ErrorCode(-115);
    pub const SESSION_MOVED: ErrorCode = ErrorCode(-118);
    pub const NOT_READ_ONLY: ErrorCode = ErrorCode(-119);
    pub const EPHEMERAL_ON_LOCAL_SESSION: ErrorCode = ErrorCode(-120);
    pub const NO_WATCHER: ErrorCode = ErrorCode(-121);
    pub const REQUEST_TIMEOUT: ErrorCode = ErrorCode(-122);
    pub const RECONFIG_DISABLED: ErrorCode = ErrorCode(-123);
    pub const SESSION_CLOSED_REQUIRE_SASL_AUTH: ErrorCode = ErrorCode(-124);
    pub const QUOTA_EXCEEDED: ErrorCode = ErrorCode(-125);
    pub const THROTTLED_OP: ErrorCode = ErrorCode(-127);

    pub fn is_ok(self) -> bool {
        self == ErrorCode::OK
    }

    /// The name ZooKeeper's `KeeperException.Code` gives this code.
    pub fn name(self) -> &'static str {
        match self.0 {
            0 => "OK",
            -1 => "SYSTEMERROR",
            -2 => "RUNTIMEINCONSISTENCY",
            -3 => "DATAINCONSISTENCY",
            -4 => "CONNECTIONLOSS",
            -5 => "MARSHALLINGERROR",
            -6 => "UNIMPLEMENTED",
            -7 => "OPERATIONTIMEOUT",
            -8 => "BADARGUMENTS",
            -12 => "UNKNOWNSESSION",
            -13 => "NEWCONFIGNOQUORUM",
            -14 => "RECONFIGINPROGRESS",
            -100 => "APIERROR",
            -101 => "NONODE",
            -102 => "NOAUTH",
            -103 => "BADVERSION",
            -108 => "NOCHILDRENFOREPHEMERALS",
            -110 => "NODEEXISTS",
            -111 => "NOTEMPTY",
            -112 => "SESSIONEXPIRED",
            -113 => "INVALIDCALLBACK",
            -114 => "INVALIDACL",
            -115 => "AUTHFAILED",
            -118 => "SESSIONMOVED",
            -119 => "NOTREADONLY",
            -120 => "EPHEMERALONLOCALSESSION",
            -121 => "NOWATCHER",
            -122 => "REQUESTTIMEOUT",
            -123 => "RECONFIGDISABLED",
            -124 => "SESSIONCLOSEDREQUIRESASLAUTH",
            -125 => "QUOTAEXCEEDED",
            -127 => "THROTTLEDOP",
            _ => "UNKNOWN",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

impl Record for ErrorCode {
    fn encode(&self, w: &mut Writer) {
        w.write_i32(self.0)
    }
    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(ErrorCode(r.read_i32()?))
    }
}

/// Watch event types (`Watcher.Event.EventType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i32)]
pub enum EventType {
    None = -1,
    NodeCreated = 1,
    NodeDeleted = 2,
    NodeDataChanged = 3,
    NodeChildrenChanged = 4,
    DataWatchRemoved = 5,
    ChildWatchRemoved = 6,
    PersistentWatchRemoved = 7,
}

/// Session states carried in watch events (`Watcher.Event.KeeperState`).
pub mod keeper_state {
    pub const DISCONNECTED: i32 = 0;
    pub const SYNC_CONNECTED: i32 = 3;
    pub const AUTH_FAILED: i32 = 4;
    pub const CONNECTED_READ_ONLY: i32 = 5;
    pub const SASL_AUTHENTICATED: i32 = 6;
    pub const EXPIRED: i32 = -112;
    pub const CLOSED: i32 = 7;
}

record! {
    /// A watch notification's body (sent with xid -1).
    pub struct WatcherEvent {
        pub event_type: i32,
        pub state: i32,
        pub path: String,
    }
}

/// Reserved xids in reply headers.
pub mod xid {
    pub const NOTIFICATION: i32 = -1;
    pub const PING: i32 = -2;
    pub const AUTH: i32 = -4;
    pub const SET_WATCHES: i32 = -8;
}

/// Watcher types of checkWatches/removeWatches (`Watcher.WatcherType`).
pub mod watcher_type {
    pub const CHILDREN: i32 = 1;
    pub const DATA: i32 = 2;
    pub const ANY: i32 = 3;
    pub const PERSISTENT: i32 = 4;
    pub const PERSISTENT_RECURSIVE: i32 = 5;
}

/// Modes of addWatch (`AddWatchMode`).
pub mod add_watch_mode {
    pub const PERSISTENT: i32 = 0;
    pub const PERSISTENT_RECURSIVE: i32 = 1;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_is_68_bytes() {
        assert_eq!(Stat::default().to_bytes().len(), Stat::ENCODED_LEN);
    }

    #[test]
    fn every_opcode_round_trips_through_its_number() {
        for op in OpCode::ALL {
            assert_eq!(OpCode::from_i32(op as i32), Some(op));
        }
        assert_eq!(OpCode::from_i32(10), None);
    }

    #[test]
    fn create_modes_round_trip_through_flags() {
        for flags in 0..7 {
            assert_eq!(CreateMode::from_flags(flags).unwrap().flags(), flags);
        }
        assert_eq!(CreateMode::from_flags(7), None);
    }
}
