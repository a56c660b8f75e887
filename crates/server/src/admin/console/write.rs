//! The console's writes. Each is made by a short client session of the console's own, over
//! an in-process pipe into [`crate::connection::serve`], the code every client connection
//! runs: handshake (a createSession proposed through consensus), `addauth digest` with the
//! operator's credentials, the write, closeSession. So a console write is proposed by the
//! leader or forwarded to it like any client's, checked against the node's ACL for the
//! operator's identities when it is applied, and answered with ZooKeeper's error codes; the
//! tree is never touched directly. The session shows in `cons` as a connection from the
//! operator's address while it lasts.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Extension, Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use warden_proto::frame::{self, FRAME_PREFIX_BYTES};
use warden_proto::request::{AuthRequest, CreateRequest, DeleteRequest, SetDataRequest};
use warden_proto::{
    Acl, ConnectRequest, ConnectResponse, CreateMode, ErrorCode, OpCode, Reader, Record,
    ReplyHeader, Request, Response as ZkResponse, Writer,
};

use super::tree::zk_error;
use super::{ApiError, Caller, Peer, Query, answer, stat_json};
use crate::server::Context;
use crate::tls::ClientStream;

/// How long a console write may take, session and all, before it is answered 504.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(15);
/// Bytes buffered in each direction of the pipe between the console and its session.
const PIPE_BYTES: usize = 64 * 1024;
/// ZooKeeper's xid for an auth packet.
const AUTH_XID: i32 = -4;

/// `POST /console/api/{create,set,delete}?path=&version=&sequential=`, the node's data the
/// request's body: a write made as a client would make it (module doc), answered with the
/// outcome; ZooKeeper's errors with their name and code.
pub async fn write(
    State(ctx): State<Arc<Context>>,
    Extension(Peer(peer)): Extension<Peer>,
    Path(op): Path<String>,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            let why = too_large(&ctx, "the request's body");
            return ApiError::new(e.status(), why).into_response();
        }
        Err(e) => return ApiError::new(e.status(), e.body_text()).into_response(),
    };
    let (request, path, credentials) = match prepare(&ctx, peer, &op, &headers, raw, body) {
        Ok(prepared) => prepared,
        Err(e) => return e.into_response(),
    };
    let outcome = tokio::time::timeout(
        WRITE_TIMEOUT,
        session(ctx.clone(), peer, credentials, request),
    )
    .await;
    let result = match outcome {
        Err(_) => Err(ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            format!("no answer within {WRITE_TIMEOUT:?}"),
        )),
        Ok(Err(e)) => Err(e),
        Ok(Ok((header, _))) if !header.err.is_ok() => Err(zk_error(header.err, &path)),
        Ok(Ok((header, body))) => {
            let (path, stat) = match body {
                ZkResponse::Create2 { path, stat } => (path, Some(stat)),
                ZkResponse::Stat(stat) => (path, Some(stat)),
                _ => (path, None),
            };
            Ok(json!({
                "op": op,
                "path": path,
                "zxid": header.zxid,
                "stat": stat.as_ref().map(stat_json),
            }))
        }
    };
    answer(result)
}

/// The request an endpoint makes, its path, and the operator's credentials; 401 without them.
fn prepare(
    ctx: &Context,
    peer: SocketAddr,
    op: &str,
    headers: &HeaderMap,
    raw: Option<String>,
    body: Bytes,
) -> Result<(Request, String, String), ApiError> {
    let caller = Caller::from_request(ctx, peer, headers)?;
    let known: &[&str] = match op {
        "create" => &["path", "sequential"],
        "set" | "delete" => &["path", "version"],
        other => {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                format!("no write {other:?}: the console writes with create, set and delete"),
            ));
        }
    };
    let q = Query::parse(raw, known)?;
    let path = q.path("path", None)?;
    let credentials = caller.credentials.ok_or_else(|| {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "writes need credentials: Authorization: digest user:password",
        )
    })?;
    let version = match q.get("version") {
        None => -1,
        Some(v) => v.parse::<i32>().ok().filter(|v| *v >= -1).ok_or_else(|| {
            ApiError::bad_request(format!("version={v:?}: expected -1 (any) or a version"))
        })?,
    };
    // The request's other fields fit easily in what is left.
    if body.len() + path.len() + 1024 > ctx.config.limits.frame_bytes_max as usize {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            too_large(ctx, &format!("{} bytes of data", body.len())),
        ));
    }

    let data = Some(body.to_vec());
    let request = match op {
        "create" => {
            let mode = match q.get("sequential") {
                None | Some("false") => CreateMode::Persistent,
                Some("true") => CreateMode::PersistentSequential,
                Some(v) => {
                    return Err(ApiError::bad_request(format!(
                        "sequential={v:?}: expected true or false"
                    )));
                }
            };
            Request::Create2(CreateRequest {
                path: path.clone(),
                data,
                acl: Acl::open(),
                flags: mode.flags(),
            })
        }
        "set" => Request::SetData(SetDataRequest {
            path: path.clone(),
            data,
            version,
        }),
        _ => Request::Delete(DeleteRequest {
            path: path.clone(),
            version,
        }),
    };
    Ok((request, path, credentials))
}

/// Runs a client session over a pipe into the connection code: handshake, addauth, the
/// request, closeSession. Returns the request's reply.
async fn session(
    ctx: Arc<Context>,
    peer: SocketAddr,
    credentials: String,
    request: Request,
) -> Result<(ReplyHeader, ZkResponse), ApiError> {
    let (mut pipe, theirs) = tokio::io::duplex(PIPE_BYTES);
    let (read, write) = tokio::io::split(theirs);
    let stream = ClientStream {
        read: Box::new(read),
        write: Box::new(write),
        tls: None,
    };
    let server = ctx.clone();
    tokio::spawn(async move {
        server
            .until_stopped(crate::connection::serve(server.clone(), stream, peer))
            .await
    });
    let frame_bytes_max = ctx.config.limits.frame_bytes_max as usize;
    let mut w = Writer::new();
    ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        timeout_ms: ctx.config.session_timeout_ms_min as i32,
        session_id: 0,
        password: vec![0; 16],
        read_only: Some(false),
    }
    .encode(&mut w);
    send(&mut pipe, &w.into_bytes()).await?;
    let answer = receive(&mut pipe, frame_bytes_max).await?;
    let connected = ConnectResponse::decode(&mut Reader::new(&answer))
        .map_err(|e| lost(format!("the handshake's answer does not decode: {e}")))?;
    if connected.session_id == 0 {
        return Err(lost("the server refused the console's session".into()));
    }
    let auth = Request::Auth(AuthRequest {
        auth_type: 0,
        scheme: "digest".into(),
        auth: credentials.into_bytes(),
    });
    let (header, _) = exchange(&mut pipe, AUTH_XID, &auth, frame_bytes_max).await?;
    if !header.err.is_ok() {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            format!("addauth digest was refused: {}", header.err.name()),
        ));
    }
    let reply = exchange(&mut pipe, 1, &request, frame_bytes_max).await?;
    // The session's end is the server's business from here: a lost closeSession leaves it
    // to expire after the shortest timeout.
    let _ = exchange(&mut pipe, 2, &Request::CloseSession, frame_bytes_max).await;
    Ok(reply)
}

/// Sends `request` as `xid` and reads its reply, skipping watch notifications (xid -1).
async fn exchange(
    pipe: &mut DuplexStream,
    xid: i32,
    request: &Request,
    frame_bytes_max: usize,
) -> Result<(ReplyHeader, ZkResponse), ApiError> {
    send(pipe, &request.encode_frame(xid)).await?;
    let op: OpCode = request.op();
    loop {
        let payload = receive(pipe, frame_bytes_max).await?;
        let (header, body) = ZkResponse::decode_frame(op, &payload)
            .map_err(|e| lost(format!("a reply does not decode: {e}")))?;
        if header.xid == xid {
            return Ok((header, body));
        }
    }
}

async fn send(pipe: &mut DuplexStream, payload: &[u8]) -> Result<(), ApiError> {
    pipe.write_all(&frame::encode_frame(payload))
        .await
        .map_err(|_| lost("the server closed the console's session".into()))
}

async fn receive(pipe: &mut DuplexStream, frame_bytes_max: usize) -> Result<Vec<u8>, ApiError> {
    let closed = |_| lost("the server closed the console's session (is it serving?)".into());
    let mut prefix = [0u8; FRAME_PREFIX_BYTES];
    pipe.read_exact(&mut prefix).await.map_err(closed)?;
    let len = frame::frame_len(&prefix, frame_bytes_max)
        .map_err(|e| lost(format!("a bad frame: {e}")))?
        .expect("the prefix is there");
    let mut payload = vec![0u8; len];
    pipe.read_exact(&mut payload).await.map_err(closed)?;
    Ok(payload)
}

/// Why a body is refused for its size.
fn too_large(ctx: &Context, what: &str) -> String {
    format!(
        "{what}: more than a request may carry (limits.frame_bytes_max, zoo.cfg's \
         jute.maxbuffer: {} bytes)",
        ctx.config.limits.frame_bytes_max
    )
}

/// ZooKeeper's ConnectionLoss: the session ended before the answer.
fn lost(why: String) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "{} ({}): {why}",
            ErrorCode::CONNECTION_LOSS.name(),
            ErrorCode::CONNECTION_LOSS.0
        ),
    )
}
