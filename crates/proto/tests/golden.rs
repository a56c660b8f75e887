//! Golden vectors: bytes captured between a real ZooKeeper 3.9.5 server and real clients
//! (the Java client, go-zookeeper, kazoo; see docs/golden-vectors.md and scripts/golden/).
//! Every frame must decode, and re-encode to exactly the captured bytes.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use warden_proto::request::MultiHeader;
use warden_proto::types::xid;
use warden_proto::{
    ConnectRequest, ConnectResponse, DecodeError, ErrorCode, OpCode, Reader, Record, ReplyHeader,
    Request, RequestHeader, Response, WatcherEvent,
};

/// One captured connection: frames in the order they crossed the wire.
#[derive(Default)]
struct Conversation {
    source: String,
    frames: Vec<(char, Vec<u8>)>,
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn hex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}

fn conversations() -> Vec<Conversation> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(golden_dir())
        .expect("tests/golden exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable golden file");
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let mut conv = Conversation {
            source: name.clone(),
            ..Default::default()
        };
        for line in text.lines() {
            if line.trim_end() == "# reconnect" {
                out.push(std::mem::take(&mut conv));
                conv.source = format!("{name} (after reconnect)");
            } else if let Some(h) = line.strip_prefix("C ") {
                conv.frames.push(('C', hex(h.trim())));
            } else if let Some(h) = line.strip_prefix("S ") {
                conv.frames.push(('S', hex(h.trim())));
            }
        }
        out.push(conv);
    }
    out.retain(|c| !c.frames.is_empty());
    out
}

/// What a file exercised, for the coverage check.
#[derive(Default)]
struct Seen {
    request_ops: BTreeSet<i32>,
    multi_result_ops: BTreeSet<i32>,
    short_handshake: bool,
    notifications: usize,
    frames: usize,
}

fn check_conversation(conv: &Conversation, seen: &mut Seen) {
    let mut frames = conv.frames.iter();
    let (dir, first) = frames.next().expect("a first frame");
    assert_eq!(*dir, 'C', "{}: first frame is the client's", conv.source);
    let connect = ConnectRequest::decode(&mut Reader::new(first))
        .unwrap_or_else(|e| panic!("{}: ConnectRequest: {e}", conv.source));
    assert_eq!(
        connect.to_bytes(),
        *first,
        "{}: ConnectRequest bytes",
        conv.source
    );
    seen.short_handshake |= connect.read_only.is_none();
    let mut answered = false;
    let mut ops: HashMap<i32, Option<OpCode>> = HashMap::new();
    for (dir, bytes) in frames {
        seen.frames += 1;
        match dir {
            'C' => {
                let decoded = Request::decode_frame(bytes);
                if let Err(DecodeError::UnknownOpCode(op)) = decoded {
                    // Captured on purpose: ZooKeeper answers an unknown opcode with
                    // Unimplemented and closes the connection.
                    let header = RequestHeader::decode(&mut Reader::new(bytes)).unwrap();
                    assert_eq!(header.op, op);
                    ops.insert(header.xid, None);
                    continue;
                }
                let (header, request) = decoded
                    .unwrap_or_else(|e| panic!("{}: request {bytes:02x?}: {e}", conv.source));
                assert_eq!(
                    request.encode_frame(header.xid),
                    *bytes,
                    "{}: request re-encoding of {request:?}",
                    conv.source
                );
                seen.request_ops.insert(header.op);
                ops.insert(header.xid, Some(request.op()));
            }
            _ if !answered => {
                answered = true;
                let response = ConnectResponse::decode(&mut Reader::new(bytes))
                    .unwrap_or_else(|e| panic!("{}: ConnectResponse: {e}", conv.source));
                assert_eq!(
                    response.to_bytes(),
                    *bytes,
                    "{}: ConnectResponse",
                    conv.source
                );
                assert_eq!(
                    response.read_only.is_some(),
                    connect.read_only.is_some(),
                    "{}: the answer takes the handshake's shape",
                    conv.source
                );
            }
            _ => check_reply(conv, bytes, &ops, seen),
        }
    }
}

fn check_reply(
    conv: &Conversation,
    bytes: &[u8],
    ops: &HashMap<i32, Option<OpCode>>,
    seen: &mut Seen,
) {
    let header = ReplyHeader::decode(&mut Reader::new(bytes)).expect("reply header");
    if header.xid == xid::NOTIFICATION {
        seen.notifications += 1;
        let mut r = Reader::new(&bytes[16..]);
        let event = WatcherEvent::decode(&mut r).expect("watcher event");
        r.finish().expect("nothing after the event");
        assert_eq!(
            warden_proto::response::encode_notification(header.zxid, &event),
            bytes,
            "{}: notification",
            conv.source
        );
        return;
    }
    let op = match header.xid {
        xid::PING => OpCode::Ping,
        xid::AUTH => OpCode::Auth,
        xid::SET_WATCHES => ops
            .get(&header.xid)
            .copied()
            .flatten()
            .unwrap_or(OpCode::SetWatches),
        x => match ops.get(&x) {
            Some(Some(op)) => *op,
            Some(None) => {
                assert_eq!(header.err, ErrorCode::UNIMPLEMENTED, "{}", conv.source);
                assert_eq!(bytes.len(), 16, "{}: no body after an error", conv.source);
                return;
            }
            None => panic!("{}: reply to unknown xid {x}", conv.source),
        },
    };
    let (header, body) = Response::decode_frame(op, bytes)
        .unwrap_or_else(|e| panic!("{}: reply to {op:?} {bytes:02x?}: {e}", conv.source));
    if let Response::Multi(results) = &body {
        for r in results {
            seen.multi_result_ops.insert(match r {
                warden_proto::OpResult::Ok { op, .. } => *op as i32,
                warden_proto::OpResult::Error(_) => MultiHeader::END.op,
            });
        }
    }
    assert_eq!(
        Response::encode_frame(&header, &body),
        bytes,
        "{}: reply to {op:?} re-encoding of {body:?}",
        conv.source
    );
}

#[test]
fn captured_frames_round_trip_byte_for_byte() {
    let convs = conversations();
    assert!(!convs.is_empty(), "no golden vectors in {:?}", golden_dir());
    let mut seen = Seen::default();
    for conv in &convs {
        check_conversation(conv, &mut seen);
    }
    // The captures must cover every client operation of ZooKeeper 3.9 that a stock server
    // answers, so that a capture that silently lost a scenario fails here.
    let expected = [
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
        OpCode::Multi,
        OpCode::Create2,
        OpCode::Reconfig,
        OpCode::CheckWatches,
        OpCode::RemoveWatches,
        OpCode::CreateContainer,
        OpCode::CreateTtl,
        OpCode::MultiRead,
        OpCode::Auth,
        OpCode::GetEphemerals,
        OpCode::GetAllChildrenNumber,
        OpCode::SetWatches2,
        OpCode::AddWatch,
        OpCode::WhoAmI,
        OpCode::CloseSession,
    ];
    let missing: Vec<OpCode> = expected
        .into_iter()
        .filter(|op| !seen.request_ops.contains(&(*op as i32)))
        .collect();
    assert!(
        missing.is_empty(),
        "golden vectors never exercise {missing:?}"
    );
    assert!(
        seen.short_handshake,
        "no capture of the short (no read-only byte) handshake"
    );
    assert!(seen.notifications > 0, "no watch notification captured");
    assert!(
        seen.multi_result_ops.contains(&(OpCode::Error as i32)),
        "no failed multi captured"
    );
    eprintln!(
        "{} conversations, {} frames, {} notifications, ops {:?}",
        convs.len(),
        seen.frames,
        seen.notifications,
        seen.request_ops
    );
}
