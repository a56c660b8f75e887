//! Client-to-server messages: the handshake, the request header, and one body type per
//! operation.

use crate::jute::{DecodeError, Reader, Record, Writer, record};
use crate::types::{Acl, OpCode};

/// The session handshake a client sends first. Old clients omit the trailing read-only byte;
/// `read_only` remembers whether it was there so the answer can take the same shape.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnectRequest {
    pub protocol_version: i32,
    pub last_zxid_seen: i64,
    pub timeout_ms: i32,
    pub session_id: i64,
    pub password: Vec<u8>,
    pub read_only: Option<bool>,
}

impl Record for ConnectRequest {
    fn encode(&self, w: &mut Writer) {
        w.write_i32(self.protocol_version);
        w.write_i64(self.last_zxid_seen);
        w.write_i32(self.timeout_ms);
        w.write_i64(self.session_id);
        w.write_bytes(&self.password);
        if let Some(read_only) = self.read_only {
            w.write_bool(read_only);
        }
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(ConnectRequest {
            protocol_version: r.read_i32()?,
            last_zxid_seen: r.read_i64()?,
            timeout_ms: r.read_i32()?,
            session_id: r.read_i64()?,
            password: Vec::<u8>::decode(r)?,
            read_only: if r.is_empty() {
                None
            } else {
                Some(r.read_bool()?)
            },
        })
    }
}

record! {
    /// Precedes every request after the handshake. `op` stays a raw number so that an unknown
    /// opcode can still be answered with its xid.
    #[derive(Copy)]
    pub struct RequestHeader {
        pub xid: i32,
        pub op: i32,
    }
}

record! {
    /// getACL, sync, getEphemerals (a path prefix), getAllChildrenNumber, deleteContainer.
    pub struct PathRequest {
        pub path: String,
    }
}

record! {
    /// exists, getData, getChildren, getChildren2.
    pub struct PathWatchRequest {
        pub path: String,
        pub watch: bool,
    }
}

record! {
    /// create, create2, createContainer and ClickHouse's createIfNotExists.
    pub struct CreateRequest {
        pub path: String,
        pub data: Option<Vec<u8>>,
        pub acl: Vec<Acl>,
        pub flags: i32,
    }
}

record! {
    pub struct CreateTtlRequest {
        pub path: String,
        pub data: Option<Vec<u8>>,
        pub acl: Vec<Acl>,
        pub flags: i32,
        pub ttl: i64,
    }
}

record! {
    /// delete, and ClickHouse's tryRemove.
    pub struct DeleteRequest {
        pub path: String,
        pub version: i32,
    }
}

record! {
    pub struct SetDataRequest {
        pub path: String,
        pub data: Option<Vec<u8>>,
        pub version: i32,
    }
}

record! {
    pub struct SetAclRequest {
        pub path: String,
        pub acl: Vec<Acl>,
        pub version: i32,
    }
}

record! {
    /// check (inside multi), and ClickHouse's checkNotExists.
    pub struct CheckVersionRequest {
        pub path: String,
        pub version: i32,
    }
}

record! {
    /// The Java client sends the lists it does not use as null.
    pub struct ReconfigRequest {
        pub joining_servers: Option<String>,
        pub leaving_servers: Option<String>,
        pub new_members: Option<String>,
        pub cur_config_id: i64,
    }
}

record! {
    /// checkWatches and removeWatches; `watcher_type` is one of [`crate::types::watcher_type`].
    pub struct WatchesRequest {
        pub path: String,
        pub watcher_type: i32,
    }
}

record! {
    pub struct AuthRequest {
        pub auth_type: i32,
        pub scheme: String,
        pub auth: Vec<u8>,
    }
}

record! {
    pub struct SetWatchesRequest {
        pub relative_zxid: i64,
        pub data_watches: Vec<String>,
        pub exist_watches: Vec<String>,
        pub child_watches: Vec<String>,
    }
}

record! {
    pub struct SetWatches2Request {
        pub relative_zxid: i64,
        pub data_watches: Vec<String>,
        pub exist_watches: Vec<String>,
        pub child_watches: Vec<String>,
        pub persistent_watches: Vec<String>,
        pub persistent_recursive_watches: Vec<String>,
    }
}

record! {
    pub struct SaslRequest {
        pub token: Vec<u8>,
    }
}

record! {
    /// `mode` is one of [`crate::types::add_watch_mode`].
    pub struct AddWatchRequest {
        pub path: String,
        pub mode: i32,
    }
}

/// ClickHouse's filteredList: getChildren2 restricted to persistent or ephemeral children.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FilteredListRequest {
    pub path: String,
    pub watch: bool,
    /// 0 all, 1 persistent only, 2 ephemeral only.
    pub list_type: u8,
}

impl Record for FilteredListRequest {
    fn encode(&self, w: &mut Writer) {
        w.write_string(&self.path);
        w.write_bool(self.watch);
        w.write_u8(self.list_type);
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(FilteredListRequest {
            path: r.read_string()?,
            watch: r.read_bool()?,
            list_type: r.read_u8()?,
        })
    }
}

record! {
    /// ClickHouse's removeRecursive: delete a subtree of at most `remove_nodes_limit` nodes
    /// (ClickHouse sends it as an unsigned 32-bit count; read it with `as u32`).
    pub struct RemoveRecursiveRequest {
        pub path: String,
        pub remove_nodes_limit: i32,
    }
}

record! {
    /// ClickHouse's checkStat: the version, and every field of `stat` that is not -1.
    pub struct CheckStatRequest {
        pub path: String,
        pub version: i32,
        pub stat: crate::types::Stat,
    }
}

/// ClickHouse's filteredListWithStatsAndData: filteredList, plus each child's Stat and data
/// on request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FilteredListWithStatsAndDataRequest {
    pub path: String,
    pub watch: bool,
    /// 0 all, 1 persistent only, 2 ephemeral only.
    pub list_type: u8,
    pub with_stat: bool,
    pub with_data: bool,
}

impl Record for FilteredListWithStatsAndDataRequest {
    fn encode(&self, w: &mut Writer) {
        w.write_string(&self.path);
        w.write_bool(self.watch);
        w.write_u8(self.list_type);
        w.write_bool(self.with_stat);
        w.write_bool(self.with_data);
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(FilteredListWithStatsAndDataRequest {
            path: r.read_string()?,
            watch: r.read_bool()?,
            list_type: r.read_u8()?,
            with_stat: r.read_bool()?,
            with_data: r.read_bool()?,
        })
    }
}

/// ClickHouse's listRecursive: every descendant's absolute path, breadth first, at most
/// `limit` of them (an unsigned 32-bit count on the wire).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListRecursiveRequest {
    pub path: String,
    pub limit: u32,
}

impl Record for ListRecursiveRequest {
    fn encode(&self, w: &mut Writer) {
        w.write_string(&self.path);
        w.write_raw(&self.limit.to_be_bytes());
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(ListRecursiveRequest {
            path: r.read_string()?,
            limit: r.read_i32()? as u32,
        })
    }
}

/// Every request a client can send after the handshake, one variant per opcode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Create(CreateRequest),
    Create2(CreateRequest),
    CreateContainer(CreateRequest),
    CreateTtl(CreateTtlRequest),
    Delete(DeleteRequest),
    DeleteContainer(PathRequest),
    Exists(PathWatchRequest),
    GetData(PathWatchRequest),
    SetData(SetDataRequest),
    GetAcl(PathRequest),
    SetAcl(SetAclRequest),
    GetChildren(PathWatchRequest),
    GetChildren2(PathWatchRequest),
    Sync(PathRequest),
    Ping,
    Check(CheckVersionRequest),
    Multi(Vec<Request>),
    MultiRead(Vec<Request>),
    Reconfig(ReconfigRequest),
    CheckWatches(WatchesRequest),
    RemoveWatches(WatchesRequest),
    Auth(AuthRequest),
    SetWatches(SetWatchesRequest),
    SetWatches2(SetWatches2Request),
    Sasl(SaslRequest),
    GetEphemerals(PathRequest),
    GetAllChildrenNumber(PathRequest),
    AddWatch(AddWatchRequest),
    WhoAmI,
    CloseSession,
    FilteredList(FilteredListRequest),
    CheckNotExists(CheckVersionRequest),
    CreateIfNotExists(CreateRequest),
    RemoveRecursive(RemoveRecursiveRequest),
    CheckStat(CheckStatRequest),
    TryRemove(DeleteRequest),
    FilteredListWithStatsAndData(FilteredListWithStatsAndDataRequest),
    ListRecursive(ListRecursiveRequest),
}

impl Request {
    pub fn op(&self) -> OpCode {
        match self {
            Request::Create(_) => OpCode::Create,
            Request::Create2(_) => OpCode::Create2,
            Request::CreateContainer(_) => OpCode::CreateContainer,
            Request::CreateTtl(_) => OpCode::CreateTtl,
            Request::Delete(_) => OpCode::Delete,
            Request::DeleteContainer(_) => OpCode::DeleteContainer,
            Request::Exists(_) => OpCode::Exists,
            Request::GetData(_) => OpCode::GetData,
            Request::SetData(_) => OpCode::SetData,
            Request::GetAcl(_) => OpCode::GetAcl,
            Request::SetAcl(_) => OpCode::SetAcl,
            Request::GetChildren(_) => OpCode::GetChildren,
            Request::GetChildren2(_) => OpCode::GetChildren2,
            Request::Sync(_) => OpCode::Sync,
            Request::Ping => OpCode::Ping,
            Request::Check(_) => OpCode::Check,
            Request::Multi(_) => OpCode::Multi,
            Request::MultiRead(_) => OpCode::MultiRead,
            Request::Reconfig(_) => OpCode::Reconfig,
            Request::CheckWatches(_) => OpCode::CheckWatches,
            Request::RemoveWatches(_) => OpCode::RemoveWatches,
            Request::Auth(_) => OpCode::Auth,
            Request::SetWatches(_) => OpCode::SetWatches,
            Request::SetWatches2(_) => OpCode::SetWatches2,
            Request::Sasl(_) => OpCode::Sasl,
            Request::GetEphemerals(_) => OpCode::GetEphemerals,
            Request::GetAllChildrenNumber(_) => OpCode::GetAllChildrenNumber,
            Request::AddWatch(_) => OpCode::AddWatch,
            Request::WhoAmI => OpCode::WhoAmI,
            Request::CloseSession => OpCode::CloseSession,
            Request::FilteredList(_) => OpCode::FilteredList,
            Request::CheckNotExists(_) => OpCode::CheckNotExists,
            Request::CreateIfNotExists(_) => OpCode::CreateIfNotExists,
            Request::RemoveRecursive(_) => OpCode::RemoveRecursive,
            Request::CheckStat(_) => OpCode::CheckStat,
            Request::TryRemove(_) => OpCode::TryRemove,
            Request::FilteredListWithStatsAndData(_) => OpCode::FilteredListWithStatsAndData,
            Request::ListRecursive(_) => OpCode::ListRecursive,
        }
    }

    /// The path the request names, for those that name exactly one.
    pub fn path(&self) -> Option<&str> {
        Some(match self {
            Request::Create(r)
            | Request::Create2(r)
            | Request::CreateContainer(r)
            | Request::CreateIfNotExists(r) => &r.path,
            Request::CreateTtl(r) => &r.path,
            Request::Delete(r) | Request::TryRemove(r) => &r.path,
            Request::CheckStat(r) => &r.path,
            Request::FilteredListWithStatsAndData(r) => &r.path,
            Request::ListRecursive(r) => &r.path,
            Request::DeleteContainer(r)
            | Request::GetAcl(r)
            | Request::Sync(r)
            | Request::GetEphemerals(r)
            | Request::GetAllChildrenNumber(r) => &r.path,
            Request::Exists(r)
            | Request::GetData(r)
            | Request::GetChildren(r)
            | Request::GetChildren2(r) => &r.path,
            Request::SetData(r) => &r.path,
            Request::SetAcl(r) => &r.path,
            Request::Check(r) | Request::CheckNotExists(r) => &r.path,
            Request::CheckWatches(r) | Request::RemoveWatches(r) => &r.path,
            Request::AddWatch(r) => &r.path,
            Request::FilteredList(r) => &r.path,
            Request::RemoveRecursive(r) => &r.path,
            _ => return None,
        })
    }

    /// Whether the request changes replicated state (and so goes through consensus).
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            Request::Create(_)
                | Request::Create2(_)
                | Request::CreateContainer(_)
                | Request::CreateTtl(_)
                | Request::Delete(_)
                | Request::DeleteContainer(_)
                | Request::SetData(_)
                | Request::SetAcl(_)
                | Request::Check(_)
                | Request::Multi(_)
                | Request::Reconfig(_)
                | Request::CloseSession
                | Request::CheckNotExists(_)
                | Request::CreateIfNotExists(_)
                | Request::RemoveRecursive(_)
                | Request::CheckStat(_)
                | Request::TryRemove(_)
        )
    }

    /// Decodes the body of a request whose header carried `op`.
    pub fn decode(op: i32, r: &mut Reader<'_>) -> Result<Request, DecodeError> {
        let op = OpCode::from_i32(op).ok_or(DecodeError::UnknownOpCode(op))?;
        Ok(match op {
            OpCode::Create => Request::Create(Record::decode(r)?),
            OpCode::Create2 => Request::Create2(Record::decode(r)?),
            OpCode::CreateContainer => Request::CreateContainer(Record::decode(r)?),
            OpCode::CreateTtl => Request::CreateTtl(Record::decode(r)?),
            OpCode::Delete => Request::Delete(Record::decode(r)?),
            OpCode::DeleteContainer => Request::DeleteContainer(Record::decode(r)?),
            OpCode::Exists => Request::Exists(Record::decode(r)?),
            OpCode::GetData => Request::GetData(Record::decode(r)?),
            OpCode::SetData => Request::SetData(Record::decode(r)?),
            OpCode::GetAcl => Request::GetAcl(Record::decode(r)?),
            OpCode::SetAcl => Request::SetAcl(Record::decode(r)?),
            OpCode::GetChildren => Request::GetChildren(Record::decode(r)?),
            OpCode::GetChildren2 => Request::GetChildren2(Record::decode(r)?),
            OpCode::Sync => Request::Sync(Record::decode(r)?),
            OpCode::Ping => Request::Ping,
            OpCode::Check => Request::Check(Record::decode(r)?),
            OpCode::Multi => Request::Multi(decode_multi(r, is_multi_write_op)?),
            OpCode::MultiRead => Request::MultiRead(decode_multi(r, is_multi_read_op)?),
            OpCode::Reconfig => Request::Reconfig(Record::decode(r)?),
            OpCode::CheckWatches => Request::CheckWatches(Record::decode(r)?),
            OpCode::RemoveWatches => Request::RemoveWatches(Record::decode(r)?),
            OpCode::Auth => Request::Auth(Record::decode(r)?),
            OpCode::SetWatches => Request::SetWatches(Record::decode(r)?),
            OpCode::SetWatches2 => Request::SetWatches2(Record::decode(r)?),
            OpCode::Sasl => Request::Sasl(Record::decode(r)?),
            OpCode::GetEphemerals => Request::GetEphemerals(Record::decode(r)?),
            OpCode::GetAllChildrenNumber => Request::GetAllChildrenNumber(Record::decode(r)?),
            OpCode::AddWatch => Request::AddWatch(Record::decode(r)?),
            OpCode::WhoAmI => Request::WhoAmI,
            OpCode::CloseSession => Request::CloseSession,
            OpCode::FilteredList => Request::FilteredList(Record::decode(r)?),
            OpCode::CheckNotExists => Request::CheckNotExists(Record::decode(r)?),
            OpCode::CreateIfNotExists => Request::CreateIfNotExists(Record::decode(r)?),
            OpCode::RemoveRecursive => Request::RemoveRecursive(Record::decode(r)?),
            OpCode::CheckStat => Request::CheckStat(Record::decode(r)?),
            OpCode::TryRemove => Request::TryRemove(Record::decode(r)?),
            OpCode::FilteredListWithStatsAndData => {
                Request::FilteredListWithStatsAndData(Record::decode(r)?)
            }
            OpCode::ListRecursive => Request::ListRecursive(Record::decode(r)?),
            OpCode::Notification | OpCode::Error | OpCode::CreateSession => {
                return Err(DecodeError::UnknownOpCode(op as i32));
            }
        })
    }

    /// Encodes the body (without the header).
    pub fn encode(&self, w: &mut Writer) {
        match self {
            Request::Create(r)
            | Request::Create2(r)
            | Request::CreateContainer(r)
            | Request::CreateIfNotExists(r) => r.encode(w),
            Request::CreateTtl(r) => r.encode(w),
            Request::Delete(r) | Request::TryRemove(r) => r.encode(w),
            Request::CheckStat(r) => r.encode(w),
            Request::FilteredListWithStatsAndData(r) => r.encode(w),
            Request::ListRecursive(r) => r.encode(w),
            Request::DeleteContainer(r)
            | Request::GetAcl(r)
            | Request::Sync(r)
            | Request::GetEphemerals(r)
            | Request::GetAllChildrenNumber(r) => r.encode(w),
            Request::Exists(r)
            | Request::GetData(r)
            | Request::GetChildren(r)
            | Request::GetChildren2(r) => r.encode(w),
            Request::SetData(r) => r.encode(w),
            Request::SetAcl(r) => r.encode(w),
            Request::Ping | Request::WhoAmI | Request::CloseSession => {}
            Request::Check(r) | Request::CheckNotExists(r) => r.encode(w),
            Request::Multi(ops) | Request::MultiRead(ops) => encode_multi(ops, w),
            Request::Reconfig(r) => r.encode(w),
            Request::CheckWatches(r) | Request::RemoveWatches(r) => r.encode(w),
            Request::Auth(r) => r.encode(w),
            Request::SetWatches(r) => r.encode(w),
            Request::SetWatches2(r) => r.encode(w),
            Request::Sasl(r) => r.encode(w),
            Request::AddWatch(r) => r.encode(w),
            Request::FilteredList(r) => r.encode(w),
            Request::RemoveRecursive(r) => r.encode(w),
        }
    }

    /// Decodes a whole request frame payload: header, then body. Trailing bytes are ignored,
    /// as ZooKeeper ignores them.
    pub fn decode_frame(payload: &[u8]) -> Result<(RequestHeader, Request), DecodeError> {
        let mut r = Reader::new(payload);
        let header = RequestHeader::decode(&mut r)?;
        let request = Request::decode(header.op, &mut r)?;
        Ok((header, request))
    }

    /// Encodes a whole request frame payload (without the length prefix).
    pub fn encode_frame(&self, xid: i32) -> Vec<u8> {
        let mut w = Writer::new();
        RequestHeader {
            xid,
            op: self.op() as i32,
        }
        .encode(&mut w);
        self.encode(&mut w);
        w.into_bytes()
    }
}

/// The header before each operation of a multi, and the terminator after the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MultiHeader {
    pub op: i32,
    pub done: bool,
    pub err: i32,
}

impl MultiHeader {
    pub const END: MultiHeader = MultiHeader {
        op: -1,
        done: true,
        err: -1,
    };
}

impl Record for MultiHeader {
    fn encode(&self, w: &mut Writer) {
        w.write_i32(self.op);
        w.write_bool(self.done);
        w.write_i32(self.err);
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(MultiHeader {
            op: r.read_i32()?,
            done: r.read_bool()?,
            err: r.read_i32()?,
        })
    }
}

/// Operations ZooKeeper's `MultiOperationRecord` accepts in a multi, plus ClickHouse's.
fn is_multi_write_op(op: OpCode) -> bool {
    matches!(
        op,
        OpCode::Create
            | OpCode::Create2
            | OpCode::CreateTtl
            | OpCode::CreateContainer
            | OpCode::Delete
            | OpCode::SetData
            | OpCode::Check
            | OpCode::CheckNotExists
            | OpCode::CreateIfNotExists
            | OpCode::RemoveRecursive
            | OpCode::CheckStat
            | OpCode::TryRemove
            // ZooKeeper's record parser accepts reads in any multi; the state machine answers
            // a read inside a write multi with an error, as ZooKeeper does.
            | OpCode::GetData
            | OpCode::GetChildren
    )
}

/// Operations a multiRead may hold: ZooKeeper's two, plus ClickHouse's list/exists reads.
fn is_multi_read_op(op: OpCode) -> bool {
    matches!(
        op,
        OpCode::GetData
            | OpCode::GetChildren
            | OpCode::Exists
            | OpCode::GetChildren2
            | OpCode::FilteredList
            | OpCode::FilteredListWithStatsAndData
            | OpCode::ListRecursive
            // As above: parsed, then refused by the state machine if it is a write.
            | OpCode::Create
            | OpCode::Create2
            | OpCode::CreateTtl
            | OpCode::CreateContainer
            | OpCode::Delete
            | OpCode::SetData
            | OpCode::Check
    )
}

fn decode_multi(
    r: &mut Reader<'_>,
    allowed: fn(OpCode) -> bool,
) -> Result<Vec<Request>, DecodeError> {
    let mut ops = Vec::new();
    loop {
        let header = MultiHeader::decode(r)?;
        if header.done {
            return Ok(ops);
        }
        let op = OpCode::from_i32(header.op).ok_or(DecodeError::UnknownOpCode(header.op))?;
        if !allowed(op) {
            return Err(DecodeError::UnexpectedOpCode(header.op));
        }
        // Every sub-operation consumes at least its header, so the frame bounds the count.
        ops.push(Request::decode(header.op, r)?);
    }
}

fn encode_multi(ops: &[Request], w: &mut Writer) {
    for op in ops {
        MultiHeader {
            op: op.op() as i32,
            done: false,
            err: -1,
        }
        .encode(w);
        op.encode(w);
    }
    MultiHeader::END.encode(w);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_keeps_its_shape() {
        let long = ConnectRequest {
            timeout_ms: 30_000,
            password: vec![0; 16],
            read_only: Some(false),
            ..Default::default()
        };
        let short = ConnectRequest {
            read_only: None,
            ..long.clone()
        };
        for req in [long, short] {
            let bytes = req.to_bytes();
            assert_eq!(
                ConnectRequest::decode(&mut Reader::new(&bytes)).unwrap(),
                req
            );
        }
    }

    #[test]
    fn multi_round_trips() {
        let multi = Request::Multi(vec![
            Request::Create(CreateRequest {
                path: "/a".into(),
                data: Some(b"x".to_vec()),
                acl: Acl::open(),
                flags: 0,
            }),
            Request::Check(CheckVersionRequest {
                path: "/a".into(),
                version: 0,
            }),
            Request::Delete(DeleteRequest {
                path: "/a".into(),
                version: -1,
            }),
        ]);
        let bytes = multi.encode_frame(7);
        let (header, decoded) = Request::decode_frame(&bytes).unwrap();
        assert_eq!(header, RequestHeader { xid: 7, op: 14 });
        assert_eq!(decoded, multi);
    }

    #[test]
    fn nested_multi_is_refused() {
        let inner = Request::Multi(vec![]);
        let mut w = Writer::new();
        MultiHeader {
            op: 14,
            done: false,
            err: -1,
        }
        .encode(&mut w);
        inner.encode(&mut w);
        MultiHeader::END.encode(&mut w);
        let bytes = w.into_bytes();
        assert_eq!(
            Request::decode(14, &mut Reader::new(&bytes)),
            Err(DecodeError::UnexpectedOpCode(14))
        );
    }

    #[test]
    fn unknown_opcode_is_reported_with_its_number() {
        assert_eq!(
            Request::decode(10, &mut Reader::new(&[])),
            Err(DecodeError::UnknownOpCode(10))
        );
    }
}
