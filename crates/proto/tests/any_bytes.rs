//! Any byte sequence decodes to a value or an error: never a panic, never a runaway
//! allocation. And every well-formed message survives encode -> decode unchanged.

use proptest::prelude::*;
use warden_proto::frame::split_frame;
use warden_proto::quorum::{QuorumPacket, Scanned, SnapshotScan, packet_len};
use warden_proto::request::{
    AddWatchRequest, AuthRequest, CheckStatRequest, CheckVersionRequest, CreateRequest,
    CreateTtlRequest, DeleteRequest, FilteredListRequest, FilteredListWithStatsAndDataRequest,
    ListRecursiveRequest, PathRequest, PathWatchRequest, ReconfigRequest, RemoveRecursiveRequest,
    SetAclRequest, SetDataRequest, SetWatches2Request, WatchesRequest,
};
use warden_proto::types::ClientInfo;
use warden_proto::{
    Acl, ConnectRequest, ConnectResponse, ErrorCode, Id, Names, OpCode, OpResult, Reader, Record,
    ReplyHeader, Request, Response, Stat,
};

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 4096,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = split_frame(&bytes, 1 << 20);
        let _ = ConnectRequest::decode(&mut Reader::new(&bytes));
        let _ = ConnectResponse::decode(&mut Reader::new(&bytes));
        let _ = Request::decode_frame(&bytes);
        for op in OpCode::ALL {
            let _ = Response::decode_frame(op, &bytes);
        }
    }

    /// What a ZooKeeper leader sends an observer: a packet is found only where it is whole and
    /// within bounds, and a snapshot dump ends within what was given, whatever the bytes.
    #[test]
    fn arbitrary_quorum_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(Some(len)) = packet_len(&bytes, 256) {
            prop_assert!(len <= bytes.len());
            let _ = QuorumPacket::decode(&bytes[..len]);
        }
        let _ = QuorumPacket::decode(&bytes);
        let mut scan = SnapshotScan::new(1 << 20);
        for end in [bytes.len() / 2, bytes.len()] {
            if let Ok(Scanned::Complete { body, total }) = scan.scan(&bytes[..end]) {
                prop_assert!(body <= total && total <= end);
                break;
            }
        }
    }

    /// Mutated valid frames reach deeper into the decoders than random bytes do.
    #[test]
    fn mutated_requests_never_panic(
        request in request(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = request.encode_frame(1);
        for (at, byte) in flips {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        let _ = Request::decode_frame(&bytes);
        let _ = Request::decode_frame(&bytes[..cut.index(bytes.len() + 1)]);
    }

    #[test]
    fn requests_round_trip(request in request(), xid in any::<i32>()) {
        let bytes = request.encode_frame(xid);
        let (header, decoded) = Request::decode_frame(&bytes).unwrap();
        prop_assert_eq!(header.xid, xid);
        prop_assert_eq!(header.op, request.op() as i32);
        prop_assert_eq!(decoded, request);
    }

    #[test]
    fn responses_round_trip((op, body) in response(), zxid in any::<i64>()) {
        let header = ReplyHeader { xid: 5, zxid, err: ErrorCode::OK };
        let bytes = Response::encode_frame(&header, &body);
        prop_assert_eq!(Response::decode_frame(op, &bytes).unwrap(), (header, body));
    }

    #[test]
    fn mutated_responses_never_panic(
        (op, body) in response(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let header = ReplyHeader { xid: 5, zxid: 1, err: ErrorCode::OK };
        let mut bytes = Response::encode_frame(&header, &body);
        for (at, byte) in flips {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        let _ = Response::decode_frame(op, &bytes);
    }
}

fn path() -> impl Strategy<Value = String> {
    "(/[a-z0-9\u{e9}]{0,6}){1,4}"
}

fn data() -> impl Strategy<Value = Option<Vec<u8>>> {
    proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64))
}

fn acl() -> impl Strategy<Value = Vec<Acl>> {
    proptest::collection::vec(
        (0..32i32, "[a-z]{1,6}", "[a-z:=0-9]{0,12}").prop_map(|(perms, scheme, id)| Acl {
            perms,
            id: Id::new(scheme, id),
        }),
        0..3,
    )
}

fn stat() -> impl Strategy<Value = Stat> {
    (any::<[i64; 6]>(), any::<[i32; 5]>()).prop_map(|(l, i)| Stat {
        czxid: l[0],
        mzxid: l[1],
        ctime: l[2],
        mtime: l[3],
        version: i[0],
        cversion: i[1],
        aversion: i[2],
        ephemeral_owner: l[4],
        data_length: i[3],
        num_children: i[4],
        pzxid: l[5],
    })
}

fn names() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec("[a-z0-9]{0,8}", 0..5)
}

fn children() -> impl Strategy<Value = Names> {
    names().prop_map(|names| names.into_iter().collect())
}

fn create() -> impl Strategy<Value = CreateRequest> {
    (path(), data(), acl(), 0..8i32).prop_map(|(path, data, acl, flags)| CreateRequest {
        path,
        data,
        acl,
        flags,
    })
}

fn path_watch() -> impl Strategy<Value = PathWatchRequest> {
    (path(), any::<bool>()).prop_map(|(path, watch)| PathWatchRequest { path, watch })
}

fn path_only() -> impl Strategy<Value = PathRequest> {
    path().prop_map(|path| PathRequest { path })
}

fn version_req() -> impl Strategy<Value = CheckVersionRequest> {
    (path(), any::<i32>()).prop_map(|(path, version)| CheckVersionRequest { path, version })
}

fn write_op() -> impl Strategy<Value = Request> {
    prop_oneof![
        create().prop_map(Request::Create),
        create().prop_map(Request::Create2),
        create().prop_map(Request::CreateContainer),
        (create(), any::<i64>()).prop_map(|(c, ttl)| Request::CreateTtl(CreateTtlRequest {
            path: c.path,
            data: c.data,
            acl: c.acl,
            flags: c.flags,
            ttl,
        })),
        (path(), any::<i32>())
            .prop_map(|(path, version)| Request::Delete(DeleteRequest { path, version })),
        (path(), data(), any::<i32>()).prop_map(|(path, data, version)| Request::SetData(
            SetDataRequest {
                path,
                data,
                version
            }
        )),
        version_req().prop_map(Request::Check),
        version_req().prop_map(Request::CheckNotExists),
        create().prop_map(Request::CreateIfNotExists),
        (path(), any::<i32>(), stat()).prop_map(|(path, version, stat)| Request::CheckStat(
            CheckStatRequest {
                path,
                version,
                stat
            }
        )),
        (path(), any::<i32>())
            .prop_map(|(path, version)| Request::TryRemove(DeleteRequest { path, version })),
        (path(), any::<i32>()).prop_map(|(path, remove_nodes_limit)| Request::RemoveRecursive(
            RemoveRecursiveRequest {
                path,
                remove_nodes_limit
            }
        )),
    ]
}

fn read_op() -> impl Strategy<Value = Request> {
    prop_oneof![
        path_watch().prop_map(Request::GetData),
        path_watch().prop_map(Request::GetChildren),
        path_watch().prop_map(Request::Exists),
        (path(), any::<bool>(), any::<u8>()).prop_map(|(path, watch, list_type)| {
            Request::FilteredList(FilteredListRequest {
                path,
                watch,
                list_type,
            })
        }),
    ]
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        (
            path(),
            any::<bool>(),
            any::<u8>(),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(|(path, watch, list_type, with_stat, with_data)| {
                Request::FilteredListWithStatsAndData(FilteredListWithStatsAndDataRequest {
                    path,
                    watch,
                    list_type,
                    with_stat,
                    with_data,
                })
            }),
        (path(), any::<u32>())
            .prop_map(|(path, limit)| Request::ListRecursive(ListRecursiveRequest { path, limit })),
        write_op(),
        read_op(),
        path_watch().prop_map(Request::GetChildren2),
        path_only().prop_map(Request::GetAcl),
        path_only().prop_map(Request::Sync),
        path_only().prop_map(Request::GetEphemerals),
        path_only().prop_map(Request::GetAllChildrenNumber),
        path_only().prop_map(Request::DeleteContainer),
        (path(), acl(), any::<i32>())
            .prop_map(|(path, acl, version)| Request::SetAcl(SetAclRequest { path, acl, version })),
        Just(Request::Ping),
        Just(Request::WhoAmI),
        Just(Request::CloseSession),
        proptest::collection::vec(write_op(), 0..5).prop_map(Request::Multi),
        proptest::collection::vec(read_op(), 0..5).prop_map(Request::MultiRead),
        (
            proptest::option::of("[a-z0-9=:;,.]{0,20}"),
            proptest::option::of("[0-9,]{0,6}"),
            proptest::option::of("[a-z0-9=:;,.]{0,20}"),
            any::<i64>()
        )
            .prop_map(
                |(joining_servers, leaving_servers, new_members, cur_config_id)| Request::Reconfig(
                    ReconfigRequest {
                        joining_servers,
                        leaving_servers,
                        new_members,
                        cur_config_id
                    }
                )
            ),
        (path(), 1..6i32).prop_map(
            |(path, watcher_type)| Request::RemoveWatches(WatchesRequest { path, watcher_type })
        ),
        (path(), 1..6i32).prop_map(
            |(path, watcher_type)| Request::CheckWatches(WatchesRequest { path, watcher_type })
        ),
        ("[a-z]{1,8}", proptest::collection::vec(any::<u8>(), 0..20)).prop_map(|(scheme, auth)| {
            Request::Auth(AuthRequest {
                auth_type: 0,
                scheme,
                auth,
            })
        }),
        (any::<i64>(), names(), names(), names(), names(), names()).prop_map(
            |(relative_zxid, d, e, c, p, r)| Request::SetWatches2(SetWatches2Request {
                relative_zxid,
                data_watches: d,
                exist_watches: e,
                child_watches: c,
                persistent_watches: p,
                persistent_recursive_watches: r,
            })
        ),
        (path(), 0..2i32)
            .prop_map(|(path, mode)| Request::AddWatch(AddWatchRequest { path, mode })),
    ]
}

fn multi_result() -> impl Strategy<Value = OpResult> {
    prop_oneof![
        (-130..0i32).prop_map(|c| OpResult::Error(ErrorCode(c))),
        path().prop_map(|path| OpResult::Ok {
            op: OpCode::Create,
            response: Response::Create { path }
        }),
        (path(), stat()).prop_map(|(path, stat)| OpResult::Ok {
            op: OpCode::Create2,
            response: Response::Create2 { path, stat }
        }),
        Just(OpResult::Ok {
            op: OpCode::Delete,
            response: Response::Empty
        }),
        Just(OpResult::Ok {
            op: OpCode::Check,
            response: Response::Empty
        }),
        stat().prop_map(|stat| OpResult::Ok {
            op: OpCode::SetData,
            response: Response::Stat(stat)
        }),
        (data(), stat()).prop_map(|(data, stat)| OpResult::Ok {
            op: OpCode::GetData,
            response: Response::GetData { data, stat }
        }),
        children().prop_map(|children| OpResult::Ok {
            op: OpCode::GetChildren,
            response: Response::GetChildren { children }
        }),
    ]
}

fn response() -> impl Strategy<Value = (OpCode, Response)> {
    prop_oneof![
        (
            children(),
            stat(),
            proptest::collection::vec(stat(), 0..3),
            proptest::collection::vec(data(), 0..3)
        )
            .prop_map(|(children, stat, stats, data)| (
                OpCode::FilteredListWithStatsAndData,
                Response::ListWithStatsAndData {
                    children,
                    stat,
                    stats,
                    data
                }
            )),
        Just((OpCode::Delete, Response::Empty)),
        path().prop_map(|path| (OpCode::Create, Response::Create { path })),
        (path(), stat())
            .prop_map(|(path, stat)| (OpCode::CreateTtl, Response::Create2 { path, stat })),
        stat().prop_map(|s| (OpCode::Exists, Response::Stat(s))),
        (data(), stat())
            .prop_map(|(data, stat)| (OpCode::GetData, Response::GetData { data, stat })),
        (acl(), stat()).prop_map(|(acl, stat)| (OpCode::GetAcl, Response::GetAcl { acl, stat })),
        children().prop_map(|children| (OpCode::GetChildren, Response::GetChildren { children })),
        (children(), stat()).prop_map(|(children, stat)| (
            OpCode::GetChildren2,
            Response::GetChildren2 { children, stat }
        )),
        path().prop_map(|path| (OpCode::Sync, Response::Sync { path })),
        names().prop_map(|paths| (OpCode::GetEphemerals, Response::GetEphemerals { paths })),
        any::<i32>().prop_map(|total| (
            OpCode::GetAllChildrenNumber,
            Response::AllChildrenNumber { total }
        )),
        proptest::collection::vec(("[a-z]{1,6}", "[a-z0-9.:]{0,12}"), 0..3).prop_map(|v| (
            OpCode::WhoAmI,
            Response::WhoAmI {
                clients: v
                    .into_iter()
                    .map(|(auth_scheme, user)| ClientInfo { auth_scheme, user })
                    .collect()
            }
        )),
        proptest::collection::vec(multi_result(), 0..6)
            .prop_map(|r| (OpCode::Multi, Response::Multi(r))),
    ]
}
