//! Server-to-client messages: the handshake answer, the reply header, one body type per
//! operation, multi results and watch notifications.

use crate::jute::{DecodeError, Reader, Record, Writer, record};
use crate::names::Names;
use crate::request::MultiHeader;
use crate::types::{Acl, ClientInfo, ErrorCode, OpCode, Stat, WatcherEvent, xid};

/// The answer to a [`crate::request::ConnectRequest`], in the same shape (with or without the
/// trailing read-only byte) as the request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnectResponse {
    pub protocol_version: i32,
    pub timeout_ms: i32,
    pub session_id: i64,
    pub password: Vec<u8>,
    pub read_only: Option<bool>,
}

impl Record for ConnectResponse {
    fn encode(&self, w: &mut Writer) {
        w.write_i32(self.protocol_version);
        w.write_i32(self.timeout_ms);
        w.write_i64(self.session_id);
        w.write_bytes(&self.password);
        if let Some(read_only) = self.read_only {
            w.write_bool(read_only);
        }
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(ConnectResponse {
            protocol_version: r.read_i32()?,
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
    /// Precedes every reply and notification.
    #[derive(Copy)]
    pub struct ReplyHeader {
        pub xid: i32,
        pub zxid: i64,
        pub err: ErrorCode,
    }
}

/// The body of a successful reply, one shape per family of operations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// delete, check, ping, auth, setWatches, closeSession, checkWatches,
    /// removeWatches, and ClickHouse's checkNotExists, removeRecursive, checkStat, tryRemove.
    Empty,
    /// create (and ClickHouse's createIfNotExists).
    Create {
        path: String,
    },
    /// create2, createContainer, createTTL.
    Create2 {
        path: String,
        stat: Stat,
    },
    /// exists, setData, setACL.
    Stat(Stat),
    /// getData, and reconfig (which returns the new configuration as data).
    GetData {
        data: Option<Vec<u8>>,
        stat: Stat,
    },
    GetAcl {
        acl: Vec<Acl>,
        stat: Stat,
    },
    GetChildren {
        children: Names,
    },
    /// getChildren2 and ClickHouse's filteredList.
    GetChildren2 {
        children: Names,
        stat: Stat,
    },
    Sync {
        path: String,
    },
    Sasl {
        token: Vec<u8>,
    },
    GetEphemerals {
        paths: Vec<String>,
    },
    AllChildrenNumber {
        total: i32,
    },
    WhoAmI {
        clients: Vec<ClientInfo>,
    },
    /// multi and multiRead.
    Multi(Vec<OpResult>),
    /// A bare result code (jute's ErrorResponse): ZooKeeper answers addWatch with code 0.
    Code(ErrorCode),
    /// ClickHouse's filteredListWithStatsAndData: `stats` and `data` are empty unless asked
    /// for, else index-aligned with `children`.
    ListWithStatsAndData {
        children: Names,
        stat: Stat,
        stats: Vec<Stat>,
        data: Vec<Option<Vec<u8>>>,
    },
}

/// One operation's outcome inside a multi or multiRead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    /// `op` is the type written in the result's header: ZooKeeper reports create2 for
    /// createTTL and createContainer results.
    Ok {
        op: OpCode,
        response: Response,
    },
    Error(ErrorCode),
}

/// Room enough for a reply header and a stat, besides a reply's data.
const REPLY_ROOM_BYTES: usize = 128;

impl Response {
    /// The bytes of node data or names the reply carries. A frame is sized for them up front:
    /// grown by doubling, a 1 MB getData reply was copied twice and held 2 MB
    /// (docs/benchmarks.md).
    fn data_len(&self) -> usize {
        match self {
            Response::GetData { data, .. } => data.as_ref().map_or(0, Vec::len),
            Response::GetChildren { children }
            | Response::GetChildren2 { children, .. }
            | Response::ListWithStatsAndData { children, .. } => children.encoded_len(),
            _ => 0,
        }
    }

    /// Decodes the body of a successful reply to a request of type `op`.
    pub fn decode(op: OpCode, r: &mut Reader<'_>) -> Result<Response, DecodeError> {
        Ok(match op {
            OpCode::Create | OpCode::CreateIfNotExists => Response::Create {
                path: r.read_string()?,
            },
            OpCode::Create2 | OpCode::CreateTtl | OpCode::CreateContainer => Response::Create2 {
                path: r.read_string()?,
                stat: Stat::decode(r)?,
            },
            OpCode::Exists | OpCode::SetData | OpCode::SetAcl => Response::Stat(Stat::decode(r)?),
            OpCode::GetData | OpCode::Reconfig => Response::GetData {
                data: r.read_buffer()?,
                stat: Stat::decode(r)?,
            },
            OpCode::GetAcl => Response::GetAcl {
                acl: Record::decode(r)?,
                stat: Stat::decode(r)?,
            },
            OpCode::GetChildren | OpCode::ListRecursive => Response::GetChildren {
                children: Record::decode(r)?,
            },
            OpCode::GetChildren2 | OpCode::FilteredList => Response::GetChildren2 {
                children: Record::decode(r)?,
                stat: Stat::decode(r)?,
            },
            OpCode::Sync => Response::Sync {
                path: r.read_string()?,
            },
            OpCode::Sasl => Response::Sasl {
                token: Record::decode(r)?,
            },
            OpCode::GetEphemerals => Response::GetEphemerals {
                paths: Record::decode(r)?,
            },
            OpCode::GetAllChildrenNumber => Response::AllChildrenNumber {
                total: r.read_i32()?,
            },
            OpCode::WhoAmI => Response::WhoAmI {
                clients: Record::decode(r)?,
            },
            OpCode::Multi | OpCode::MultiRead => Response::Multi(decode_results(r)?),
            OpCode::AddWatch => Response::Code(ErrorCode::decode(r)?),
            OpCode::FilteredListWithStatsAndData => Response::ListWithStatsAndData {
                children: Record::decode(r)?,
                stat: Stat::decode(r)?,
                stats: r.read_vec(Stat::ENCODED_LEN, Stat::decode)?,
                data: r.read_vec(4, Reader::read_buffer)?,
            },
            OpCode::Delete
            | OpCode::DeleteContainer
            | OpCode::Check
            | OpCode::Ping
            | OpCode::Auth
            | OpCode::SetWatches
            | OpCode::SetWatches2
            | OpCode::CloseSession
            | OpCode::CheckWatches
            | OpCode::RemoveWatches
            | OpCode::CheckNotExists
            | OpCode::RemoveRecursive
            | OpCode::CheckStat
            | OpCode::TryRemove => Response::Empty,
            OpCode::Notification | OpCode::Error | OpCode::CreateSession => {
                return Err(DecodeError::UnexpectedOpCode(op as i32));
            }
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        match self {
            Response::Empty => {}
            Response::Create { path } | Response::Sync { path } => w.write_string(path),
            Response::Create2 { path, stat } => {
                w.write_string(path);
                stat.encode(w);
            }
            Response::Stat(stat) => stat.encode(w),
            Response::GetData { data, stat } => {
                w.write_buffer(data.as_deref());
                stat.encode(w);
            }
            Response::GetAcl { acl, stat } => {
                acl.encode(w);
                stat.encode(w);
            }
            Response::GetChildren { children } => children.encode(w),
            Response::GetChildren2 { children, stat } => {
                children.encode(w);
                stat.encode(w);
            }
            Response::Sasl { token } => token.encode(w),
            Response::GetEphemerals { paths } => paths.encode(w),
            Response::AllChildrenNumber { total } => w.write_i32(*total),
            Response::WhoAmI { clients } => clients.encode(w),
            Response::Multi(results) => encode_results(results, w),
            Response::Code(code) => code.encode(w),
            Response::ListWithStatsAndData {
                children,
                stat,
                stats,
                data,
            } => {
                children.encode(w);
                stat.encode(w);
                w.write_vec(stats, |w, s| s.encode(w));
                w.write_vec(data, |w, d| w.write_buffer(d.as_deref()));
            }
        }
    }

    /// Encodes a whole reply payload (without the length prefix): the header, then the body
    /// only if the reply is a success, as ZooKeeper does.
    pub fn encode_frame(header: &ReplyHeader, body: &Response) -> Vec<u8> {
        let mut w = Writer::with_capacity(REPLY_ROOM_BYTES + body.data_len());
        header.encode(&mut w);
        if header.err.is_ok() {
            body.encode(&mut w);
        }
        w.into_bytes()
    }

    /// Decodes a whole reply payload to a request of type `op`.
    pub fn decode_frame(
        op: OpCode,
        payload: &[u8],
    ) -> Result<(ReplyHeader, Response), DecodeError> {
        let mut r = Reader::new(payload);
        let header = ReplyHeader::decode(&mut r)?;
        let body = if header.err.is_ok() {
            Response::decode(op, &mut r)?
        } else {
            Response::Empty
        };
        r.finish()?;
        Ok((header, body))
    }
}

/// Encodes a watch notification payload.
pub fn encode_notification(zxid: i64, event: &WatcherEvent) -> Vec<u8> {
    let mut w = Writer::new();
    ReplyHeader {
        xid: xid::NOTIFICATION,
        zxid,
        err: ErrorCode::OK,
    }
    .encode(&mut w);
    event.encode(&mut w);
    w.into_bytes()
}

fn decode_results(r: &mut Reader<'_>) -> Result<Vec<OpResult>, DecodeError> {
    let mut results = Vec::new();
    loop {
        let header = MultiHeader::decode(r)?;
        if header.done {
            return Ok(results);
        }
        if header.op == OpCode::Error as i32 {
            // The error code appears twice, in the header and in an ErrorResponse body.
            let err = ErrorCode::decode(r)?;
            if err.0 != header.err {
                return Err(DecodeError::MalformedMulti(
                    "error code differs from header",
                ));
            }
            results.push(OpResult::Error(err));
            continue;
        }
        let op = OpCode::from_i32(header.op).ok_or(DecodeError::UnknownOpCode(header.op))?;
        if matches!(op, OpCode::Multi | OpCode::MultiRead) {
            return Err(DecodeError::UnexpectedOpCode(header.op));
        }
        results.push(OpResult::Ok {
            op,
            response: Response::decode(op, r)?,
        });
    }
}

fn encode_results(results: &[OpResult], w: &mut Writer) {
    for result in results {
        match result {
            OpResult::Ok { op, response } => {
                MultiHeader {
                    op: *op as i32,
                    done: false,
                    err: 0,
                }
                .encode(w);
                response.encode(w);
            }
            OpResult::Error(err) => {
                MultiHeader {
                    op: OpCode::Error as i32,
                    done: false,
                    err: err.0,
                }
                .encode(w);
                err.encode(w);
            }
        }
    }
    MultiHeader::END.encode(w);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_reply_is_encoded_into_one_allocation_of_its_size() {
        let header = ReplyHeader {
            xid: 1,
            zxid: 2,
            err: ErrorCode::OK,
        };
        let body = Response::GetData {
            data: Some(vec![7; 1_000_000]),
            stat: Stat::default(),
        };
        let bytes = Response::encode_frame(&header, &body);
        assert!(bytes.len() > 1_000_000);
        assert!(bytes.capacity() <= 1_000_000 + REPLY_ROOM_BYTES);
    }

    #[test]
    fn error_reply_carries_no_body() {
        let header = ReplyHeader {
            xid: 3,
            zxid: 9,
            err: ErrorCode::NO_NODE,
        };
        let bytes = Response::encode_frame(&header, &Response::Stat(Stat::default()));
        assert_eq!(bytes.len(), 16);
        assert_eq!(
            Response::decode_frame(OpCode::Exists, &bytes).unwrap(),
            (header, Response::Empty)
        );
    }

    #[test]
    fn failed_multi_round_trips() {
        let body = Response::Multi(vec![
            OpResult::Error(ErrorCode::OK),
            OpResult::Error(ErrorCode::NODE_EXISTS),
            OpResult::Error(ErrorCode::RUNTIME_INCONSISTENCY),
        ]);
        let header = ReplyHeader {
            xid: 1,
            zxid: 5,
            err: ErrorCode::OK,
        };
        let bytes = Response::encode_frame(&header, &body);
        assert_eq!(
            Response::decode_frame(OpCode::Multi, &bytes).unwrap(),
            (header, body)
        );
    }

    #[test]
    fn multi_result_error_code_must_match_its_header() {
        let mut w = Writer::new();
        MultiHeader {
            op: -1,
            done: false,
            err: -101,
        }
        .encode(&mut w);
        w.write_i32(-110);
        MultiHeader::END.encode(&mut w);
        let bytes = w.into_bytes();
        assert!(matches!(
            Response::decode(OpCode::Multi, &mut Reader::new(&bytes)),
            Err(DecodeError::MalformedMulti(_))
        ));
    }
}
