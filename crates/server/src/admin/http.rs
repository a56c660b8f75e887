//! The admin HTTP server, on the server's tokio runtime: ZooKeeper's AdminServer
//! (`GET <commandURL>` lists the commands, `GET <commandURL>/<name>` runs one), ClickHouse
//! Keeper's `/ready`, and `/health` for load balancers and liveness probes (docs/admin.md).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::commands::{self, COMMANDS};
use super::json::Json;
use crate::config::Admin;
use crate::server::Context;

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

/// Serves admin requests on `listener` until the task is aborted.
pub async fn serve(ctx: Arc<Context>, listener: TcpListener) {
    let addr = listener.local_addr().ok();
    let url = ctx.config.admin.command_url.clone();
    let idle = Duration::from_millis(u64::from(ctx.config.admin.idle_timeout_ms));
    tracing::info!(?addr, commands = %url, "serving admin HTTP");
    serve_app(listener, router(ctx, &url), idle, "an admin connection").await;
}

/// Serves `app` on `listener`, at most [`ADMIN_CONNECTIONS_MAX`] connections at once, each
/// closed after `idle` without a request; `what` names a connection in logs.
pub(super) async fn serve_app(
    listener: TcpListener,
    app: Router,
    idle: Duration,
    what: &'static str,
) {
    let permits = Arc::new(Semaphore::new(ADMIN_CONNECTIONS_MAX));
    loop {
        let permit = permits
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        let (stream, peer) = crate::server::accept(&listener, what).await;
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
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
    Router::new()
        .route(url, get(links))
        .route(&format!("{url}/"), get(links))
        .route(&format!("{url}/{{name}}"), get(command).post(command_post))
        .route("/ready", get(ready))
        .route("/health", get(health))
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
    headers: HeaderMap,
) -> Response {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    json(commands::run(&ctx, &name, authorization))
}

async fn command_post(
    State(ctx): State<Arc<Context>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if name == commands::PROMOTE {
        return json(commands::promote(&ctx, authorization).await);
    }
    json(commands::run_post(&ctx, &name, authorization))
}

fn json(r: commands::Response) -> Response {
    let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = Json::Object(r.body).to_pretty();
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from(body),
    )
        .into_response()
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
