//! The web console (docs/console.md): a page served by the admin HTTP server under
//! `/console`, and the JSON it reads under `/console/api/`, drawn from the server's own state
//! and the same facts as the admin commands.
//!
//! - [`tree`]: children (paged), a node's data, Stat and ACL, search by path prefix, biggest
//!   subtrees; every answer bounded.
//! - [`status`]: sessions with their ephemerals and watches, the cluster, the live figures the
//!   charts poll.
//! - [`write`]: create, set and delete, made by a client session of the console's own over the
//!   normal request path, so that they are proposed, forwarded, checked and answered as any
//!   client's.
//!
//! Reads are open, with the identities a client from the same address would have (plus the
//! digest of an `Authorization` header): a node's ACL applies to the console as to a client.
//! Writes need `Authorization: digest user:password`, the header and scheme ZooKeeper's admin
//! commands take.

mod status;
mod tree;
mod write;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Extension, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use warden_proto::{Id, Stat};
use warden_state::acl;

use crate::server::Context;

/// The address of the HTTP client a request came from, set on each admin connection.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub SocketAddr);

const INDEX_HTML: &str = include_str!("assets/index.html");
const CONSOLE_JS: &str = include_str!("assets/console.js");
const CONSOLE_CSS: &str = include_str!("assets/console.css");

/// The console's routes, under `/console`; a write's body may be as large as a client's
/// request (`limits.frame_bytes_max`, `body_bytes_max`), far above axum's default.
pub fn routes(body_bytes_max: usize) -> Router<Arc<Context>> {
    Router::new()
        .route("/console", get(index))
        .route("/console/", get(index))
        .route("/console/{asset}", get(asset))
        .route("/console/api/children", get(tree::children))
        .route("/console/api/node", get(tree::node))
        .route("/console/api/search", get(tree::search))
        .route("/console/api/biggest", get(tree::biggest))
        .route("/console/api/sessions", get(status::sessions))
        .route("/console/api/cluster", get(status::cluster))
        .route("/console/api/live", get(status::live))
        .route("/console/api/whoami", get(whoami))
        .route(
            "/console/api/{write}",
            post(write::write).layer(DefaultBodyLimit::max(body_bytes_max)),
        )
}

async fn index() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        INDEX_HTML,
    )
        .into_response()
}

async fn asset(Path(name): Path<String>) -> Response {
    let (kind, body) = match name.as_str() {
        "console.js" => ("text/javascript; charset=utf-8", CONSOLE_JS),
        "console.css" => ("text/css; charset=utf-8", CONSOLE_CSS),
        _ => {
            return ApiError::new(StatusCode::NOT_FOUND, format!("no {name} here")).into_response();
        }
    };
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

/// Who the console takes the caller for: the identities reads are checked with, and whether
/// writes are open to it.
async fn whoami(
    State(ctx): State<Arc<Context>>,
    Extension(Peer(peer)): Extension<Peer>,
    headers: HeaderMap,
) -> Response {
    match Caller::from_request(&ctx, peer, &headers) {
        Ok(caller) => ok(json!({
            "ids": caller.ids.iter().map(|id| format!("{}:{}", id.scheme, id.id)).collect::<Vec<_>>(),
            "can_write": caller.credentials.is_some(),
        })),
        Err(e) => e.into_response(),
    }
}

/// An answer other than success: its status and a message that says what was wrong.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }

    fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "error": self.message });
        (
            self.status,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response()
    }
}

fn ok(body: Value) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body.to_string(),
    )
        .into_response()
}

/// A JSON answer, or the error that stopped it.
fn answer(result: Result<Value, ApiError>) -> Response {
    match result {
        Ok(body) => ok(body),
        Err(e) => e.into_response(),
    }
}

/// Who asks: the ids a ZooKeeper client from the same address would have (`ip:`), with the
/// digest of `Authorization: digest user:password` when it is given (and `super` for the
/// configured super digest), as ZooKeeper's admin server reads that header.
pub(crate) struct Caller {
    pub ids: Vec<Id>,
    /// `user:password`, when the request carried them: writes need them.
    pub credentials: Option<String>,
}

impl Caller {
    fn of(
        peer: SocketAddr,
        headers: &HeaderMap,
        super_digest: Option<&str>,
    ) -> Result<Caller, ApiError> {
        let mut ids = vec![Id::new("ip", peer.ip().to_string())];
        let credentials = match headers.get(header::AUTHORIZATION) {
            None => None,
            Some(value) => {
                let credentials = value
                    .to_str()
                    .ok()
                    .and_then(|v| v.trim().strip_prefix("digest "))
                    .map(str::trim)
                    .filter(|c| c.split_once(':').is_some_and(|(user, _)| !user.is_empty()))
                    .ok_or_else(|| {
                        ApiError::new(
                            StatusCode::UNAUTHORIZED,
                            "the Authorization header must be `digest user:password`",
                        )
                    })?;
                ids.extend(acl::authenticate_digest(credentials, super_digest));
                Some(credentials.to_owned())
            }
        };
        Ok(Caller { ids, credentials })
    }

    fn from_request(
        ctx: &Context,
        peer: SocketAddr,
        headers: &HeaderMap,
    ) -> Result<Caller, ApiError> {
        Caller::of(peer, headers, ctx.config.super_digest.as_deref())
    }
}

/// A request's query parameters, percent-decoded; only the names an endpoint knows.
pub(crate) struct Query(Vec<(String, String)>);

impl Query {
    fn parse(raw: Option<String>, known: &[&str]) -> Result<Query, ApiError> {
        let mut params = Vec::new();
        for pair in raw
            .as_deref()
            .unwrap_or("")
            .split('&')
            .filter(|p| !p.is_empty())
        {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let name = percent_decode(name)?;
            if !known.contains(&name.as_str()) {
                return Err(ApiError::bad_request(format!(
                    "unknown parameter {name:?}; this endpoint takes {}",
                    known.join(", ")
                )));
            }
            params.push((name, percent_decode(value)?));
        }
        Ok(Query(params))
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// A ZooKeeper path parameter, checked as ZooKeeper checks paths; `default` if absent.
    fn path(&self, name: &str, default: Option<&str>) -> Result<String, ApiError> {
        let path = self
            .get(name)
            .or(default)
            .ok_or_else(|| ApiError::bad_request(format!("missing parameter {name}")))?;
        warden_state::path::validate(path).map_err(|why| {
            ApiError::bad_request(format!("{name}={path:?} is not a valid path: {why:?}"))
        })?;
        Ok(path.to_owned())
    }

    /// A number parameter within `1..=max`, `default` if absent.
    fn count(&self, name: &str, default: usize, max: usize) -> Result<usize, ApiError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "{name}={v:?}: expected a number from 1 to {max}"
                    ))
                }),
        }
    }
}

/// `%XX` escapes and `+` (a blank, as forms send it) decoded; the result must be UTF-8.
fn percent_decode(s: &str) -> Result<String, ApiError> {
    let bad = || ApiError::bad_request(format!("{s:?} is not a well-formed query value"));
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).ok_or_else(bad)?;
                let hex = std::str::from_utf8(hex).map_err(|_| bad())?;
                out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

/// A Stat as the console shows it: ZooKeeper's field names; the owner session in hex (session
/// ids do not fit a JavaScript number).
fn stat_json(s: &Stat) -> Value {
    json!({
        "czxid": s.czxid,
        "mzxid": s.mzxid,
        "pzxid": s.pzxid,
        "ctime": s.ctime,
        "mtime": s.mtime,
        "version": s.version,
        "cversion": s.cversion,
        "aversion": s.aversion,
        "ephemeralOwner": session_hex(s.ephemeral_owner),
        "dataLength": s.data_length,
        "numChildren": s.num_children,
    })
}

fn session_hex(id: i64) -> String {
    format!("0x{id:x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_percent_decoded_and_unknown_names_refused() {
        let q = Query::parse(Some("path=%2Fa%20b&limit=5".into()), &["path", "limit"]).unwrap();
        assert_eq!(q.get("path"), Some("/a b"));
        assert_eq!(q.count("limit", 10, 100).unwrap(), 5);
        assert_eq!(q.path("path", None).unwrap(), "/a b");
        let e = Query::parse(Some("pth=/".into()), &["path"]).err().unwrap();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(e.message.contains("pth"), "{}", e.message);
        assert!(Query::parse(Some("path=%zz".into()), &["path"]).is_err());
        assert!(Query::parse(Some("path=%C3".into()), &["path"]).is_err());
        let q = Query::parse(Some("limit=0&path=a".into()), &["path", "limit"]).unwrap();
        assert!(q.count("limit", 10, 100).is_err());
        assert!(q.path("path", None).is_err());
        let q = Query::parse(None, &["path"]).unwrap();
        assert_eq!(q.path("path", Some("/")).unwrap(), "/");
    }

    #[test]
    fn the_authorization_header_is_a_digest_of_user_and_password() {
        let peer: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let mut headers = HeaderMap::new();
        let caller = Caller::of(peer, &headers, None).unwrap();
        assert_eq!(caller.ids, [Id::new("ip", "127.0.0.1")]);
        assert!(caller.credentials.is_none());
        headers.insert(header::AUTHORIZATION, "digest bob:secret".parse().unwrap());
        let caller = Caller::of(peer, &headers, None).unwrap();
        assert_eq!(caller.ids[1], Id::new("digest", acl::digest("bob:secret")));
        assert_eq!(caller.credentials.as_deref(), Some("bob:secret"));
        let super_digest = acl::digest("bob:secret");
        let caller = Caller::of(peer, &headers, Some(&super_digest)).unwrap();
        assert!(caller.ids.contains(&acl::super_id()));
        for bad in ["Basic Ym9iOnNlY3JldA==", "digest bob", "digest :x"] {
            headers.insert(header::AUTHORIZATION, bad.parse().unwrap());
            let e = Caller::of(peer, &headers, None).err().unwrap();
            assert_eq!(e.status, StatusCode::UNAUTHORIZED, "{bad}");
        }
    }
}
