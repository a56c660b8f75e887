//! The admin HTTP server, on the server's tokio runtime: ZooKeeper's AdminServer
//! (`GET <commandURL>` lists the commands, `GET <commandURL>/<name>` runs one), ClickHouse
//! Keeper's `/ready`, `/health` for load balancers and liveness probes (docs/admin.md), and
//! the web console under `/console` (docs/console.md); over HTTP, HTTPS, or both on one port
//! as ZooKeeper's `admin.forceHttps` and `admin.portUnification` say.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::commands::{self, COMMANDS};
use super::console::{self, Peer};
use super::json::Json;
use super::snapshots;
use crate::config::{Admin, AdminHttps};
use crate::server::Context;
use crate::tls::HttpsContext;

/// Admin connections served at once; more wait in the listen backlog. Monitoring polls with a
/// handful, so this only bounds what a misbehaving client can make the server hold.
pub const ADMIN_CONNECTIONS_MAX: usize = 64;

/// Binds the admin listener, before anything else starts, so that an address the operator
/// named and cannot have stops the start. `None`: disabled, or the default address is taken
/// (logged).
pub async fn bind(admin: &Admin) -> std::io::Result<Option<TcpListener>> {
    if !admin.enabled {
        return Ok(None);
    }
    let (listen, named) = admin.address();
    match TcpListener::bind((listen.host.as_str(), listen.port)).await {
        Ok(listener) => Ok(Some(listener)),
        Err(e) if !named => {
            tracing::warn!(
                addr = %listen,
                error = %e,
                "no admin HTTP server: its default address is not free; set \
                 admin.serverPort (zoo.cfg) or [admin] listen (TOML) to choose one"
            );
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Whether connections are HTTP, HTTPS, or either.
#[derive(Clone)]
pub enum Scheme {
    Http,
    Https(HttpsContext),
    /// Told apart by the first byte.
    Either(HttpsContext),
}

/// Serves admin requests on `listener` until the task is aborted; over HTTPS too with `tls`
/// (as `admin.https` says).
pub async fn serve(ctx: Arc<Context>, listener: TcpListener, tls: Option<HttpsContext>) {
    let addr = listener.local_addr().ok();
    let url = ctx.config.admin.command_url.clone();
    let idle = Duration::from_millis(u64::from(ctx.config.admin.idle_timeout_ms));
    let scheme = match (ctx.config.admin.https, tls) {
        (AdminHttps::Only, Some(tls)) => Scheme::Https(tls),
        (AdminHttps::Either, Some(tls)) => Scheme::Either(tls),
        _ => Scheme::Http,
    };
    tracing::info!(?addr, commands = %url, https = ?ctx.config.admin.https, "serving admin HTTP");
    let app = router(ctx, &url);
    serve_app(listener, app, scheme, idle, "an admin connection").await;
}

/// Anything hyper can serve a connection over: a socket, or TLS over one.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Io for T {}

/// The connection as `scheme` takes it: the TLS handshake done (within `limit`) for an HTTPS
/// one, and whether it is. None: closed, with a log line.
async fn open(
    stream: tokio::net::TcpStream,
    scheme: &Scheme,
    limit: Duration,
    peer: std::net::SocketAddr,
    what: &str,
) -> Option<(Box<dyn Io>, bool)> {
    let tls = match scheme {
        Scheme::Http => return Some((Box::new(stream), false)),
        Scheme::Https(tls) => tls,
        Scheme::Either(tls) => match crate::tls::opens_with_tls(&stream, limit).await {
            Ok(true) => tls,
            Ok(false) => return Some((Box::new(stream), false)),
            Err(e) => {
                tracing::debug!(%peer, "{what} ended before its first byte: {e}");
                return None;
            }
        },
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.current());
    match tokio::time::timeout(limit, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => Some((Box::new(stream), true)),
        Ok(Err(e)) => {
            tracing::warn!(%peer, "closing {what}: TLS handshake failed: {e}");
            None
        }
        Err(_) => {
            tracing::warn!(%peer, "closing {what}: TLS handshake not done within {limit:?}");
            None
        }
    }
}

/// Jetty's HSTS header on HTTPS responses (ZooKeeper: max-age one day).
async fn strict_transport_security(mut response: Response) -> Response {
    response.headers_mut().insert(
        header::STRICT_TRANSPORT_SECURITY,
        header::HeaderValue::from_static("max-age=86400"),
    );
    response
}

/// Serves `app` on `listener` as `scheme` says, at most [`ADMIN_CONNECTIONS_MAX`] connections
/// at once, each closed after `idle` without a request; `what` names a connection in logs.
pub(super) async fn serve_app(
    listener: TcpListener,
    app: Router,
    scheme: Scheme,
    idle: Duration,
    what: &'static str,
) {
    let https_app = app
        .clone()
        .layer(axum::middleware::map_response(strict_transport_security));
    let permits = Arc::new(Semaphore::new(ADMIN_CONNECTIONS_MAX));
    loop {
        let permit = permits
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        let (stream, peer) = crate::server::accept(&listener, what).await;
        let (app, https_app, scheme) = (app.clone(), https_app.clone(), scheme.clone());
        tokio::spawn(async move {
            let Some((stream, secure)) = open(stream, &scheme, idle, peer, what).await else {
                return;
            };
            // Each request knows its connection's peer: the console checks ACLs with its
            // address.
            let app = if secure { https_app } else { app };
            let service = TowerToHyperService::new(app.layer(Extension(Peer(peer))));
            let mut http = hyper::server::conn::http1::Builder::new();
            // Jetty's idle timeout: hyper times the wait for each request's headers, which
            // is the time a kept-alive connection sits idle.
            http.timer(TokioTimer::new()).header_read_timeout(idle);
            if let Err(e) = http.serve_connection(TokioIo::new(stream), service).await {
                tracing::debug!(%peer, error = %e, "{what} ended");
            }
            drop(permit);
        });
    }
}

fn router(ctx: Arc<Context>, url: &str) -> Router {
    let frame_bytes_max = ctx.config.limits.frame_bytes_max as usize;
    Router::new()
        .route(url, get(links))
        .route(&format!("{url}/"), get(links))
        .route(&format!("{url}/{{name}}"), get(command).post(command_post))
        .route("/ready", get(ready))
        .route("/health", get(health))
        .merge(console::routes(frame_bytes_max))
        .with_state(ctx)
}

/// ZooKeeper's links page: one link per primary name, sorted.
async fn links(State(ctx): State<Arc<Context>>) -> Response {
    let url = &ctx.config.admin.command_url;
    let body: String = COMMANDS
        .iter()
        .map(|c| format!("<a href=\"{url}/{0}\">{0}</a><br/>\n", c.name()))
        .collect();
    ([(header::CONTENT_TYPE, "text/html")], body).into_response()
}

async fn command(
    State(ctx): State<Arc<Context>>,
    Path(name): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    match commands::find(&name).map(commands::Command::name) {
        Some("snapshot") => {
            reply(snapshots::snapshot(&ctx, uri.query(), authorization(&headers)).await)
        }
        _ => json(commands::run(&ctx, &name)),
    }
}

async fn command_post(
    State(ctx): State<Arc<Context>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if name == commands::PROMOTE {
        return json(commands::promote(&ctx, authorization(&headers)).await);
    }
    match commands::find(&name).map(commands::Command::name) {
        Some("restore") => reply(snapshots::restore(&ctx, authorization(&headers), body).await),
        _ => json(commands::run_post(&ctx, &name)),
    }
}

fn authorization(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
}

fn json(r: commands::Response) -> Response {
    reply(snapshots::Reply::Json(r, Vec::new()))
}

/// An answer with ZooKeeper's headers: JSON, or a snapshot's bytes as
/// `application/octet-stream` (its `StreamOutputter`).
fn reply(r: snapshots::Reply) -> Response {
    let (status, content_type, body, extra) = match r {
        snapshots::Reply::Json(r, extra) => (
            StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            "application/json",
            Body::from(Json::Object(r.body).to_pretty()),
            extra,
        ),
        snapshots::Reply::Bytes(bytes, extra) => (
            StatusCode::OK,
            "application/octet-stream",
            Body::from(bytes),
            extra,
        ),
    };
    let mut response = (status, [(header::CONTENT_TYPE, content_type)], body).into_response();
    for (name, value) in extra {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// ClickHouse Keeper's readiness (`KeeperReadinessHandler`): ok on a server that serves
/// clients, 503 otherwise, with its role and whether it knows a leader.
async fn ready(State(ctx): State<Arc<Context>>) -> Response {
    let leader = ctx.consensus.leader();
    let me = ctx.consensus.node_id();
    let observer = ctx.consensus.status().learners.contains(&me);
    let role = if leader == Some(me) {
        "leader"
    } else if observer {
        "observer"
    } else {
        "follower"
    };
    let ok = ctx.serving();
    let body = format!(
        "{{\"details\":{{\"role\":\"{role}\",\"hasLeader\":{}}},\"status\":\"{}\"}}",
        leader.is_some(),
        if ok { "ok" } else { "fail" }
    );
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Liveness: the process answers. Whether it serves clients is `/ready`'s question; a
/// follower cut off from its quorum is alive and must not be restarted for it.
async fn health() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        "{\"status\":\"ok\"}",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::HostPort;

    #[tokio::test]
    async fn a_taken_default_address_is_given_up_a_named_one_is_an_error() {
        let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = taken.local_addr().unwrap().port();
        let mut admin = Admin {
            listen_default: HostPort::new("127.0.0.1", port),
            ..Admin::default()
        };
        assert!(bind(&admin).await.unwrap().is_none());
        admin.listen = Some(HostPort::new("127.0.0.1", port));
        assert!(bind(&admin).await.is_err());
        admin.listen = Some(HostPort::new("127.0.0.1", 0));
        assert!(bind(&admin).await.unwrap().is_some());
        admin.enabled = false;
        assert!(bind(&admin).await.unwrap().is_none());
    }
}
