//! ZooKeeper 3.9's `snapshot` and `restore` admin commands (`Commands.SnapshotCommand` and
//! `RestoreCommand`): the state streamed out in ZooKeeper's snapshot format, and a ZooKeeper
//! snapshot read in and made the state of every member through the log (docs/admin.md).
//!
//! Both need an `Authorization` header whose identities hold every permission on `/`, are
//! switched by admin.snapshot.enabled / admin.restore.enabled (503 when off) and rate
//! limited (429), all as ZooKeeper 3.9.5 answers.

use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use warden_proto::Acl;
use warden_proto::types::perms;
use warden_state::{StateConfig, TxnKind, acl};

use super::commands::{self, Response};
use super::facts;
use crate::config::Admin;
use crate::consensus::Proposal;
use crate::server::Context;

/// One request per interval, as ZooKeeper's `RateLimiter(1, interval, unit)`: the first
/// request after a full interval passes, any other is refused.
#[derive(Debug)]
pub struct RateLimiter {
    interval: Duration,
    last: Mutex<Option<Instant>>,
}

impl RateLimiter {
    pub fn new(interval: Duration) -> RateLimiter {
        RateLimiter {
            interval,
            last: Mutex::new(None),
        }
    }

    fn allow(&self, now: Instant) -> bool {
        let mut last = self.last.lock().expect("rate limiter lock poisoned");
        match *last {
            Some(at) if now.duration_since(at) <= self.interval => false,
            _ => {
                *last = Some(now);
                true
            }
        }
    }
}

/// The two commands' rate limiters, kept for the life of the server.
#[derive(Debug)]
pub struct Limiters {
    snapshot: RateLimiter,
    restore: RateLimiter,
}

impl Limiters {
    /// As ZooKeeper reads admin.rateLimiterIntervalInMS: in milliseconds for `restore`, and
    /// (its `SnapshotCommand` passes `TimeUnit.MICROSECONDS`) in microseconds for `snapshot`.
    pub fn new(admin: &Admin) -> Limiters {
        let n = admin.rate_limit_interval_ms;
        Limiters {
            snapshot: RateLimiter::new(Duration::from_micros(n)),
            restore: RateLimiter::new(Duration::from_millis(n)),
        }
    }
}

/// What a command answers: JSON, or the snapshot's bytes; both with extra headers.
pub enum Reply {
    Json(Response, Vec<(&'static str, String)>),
    Bytes(Vec<u8>, Vec<(&'static str, String)>),
}

/// `GET snapshot?streaming=...`: a consistent copy of the state, in ZooKeeper's format.
pub async fn snapshot(
    ctx: &Arc<Context>,
    query: Option<&str>,
    authorization: Option<&str>,
) -> Reply {
    const NAME: &str = "snapshot";
    if let Err(refused) = admit(ctx, NAME, authorization) {
        return Reply::Json(refused, Vec::new());
    }
    if !ctx.config.admin.snapshot_enabled {
        tracing::warn!("the snapshot command is disabled (admin.snapshot.enabled)");
        return Reply::Json(Response::status(503, NAME), Vec::new());
    }
    if !ctx.admin_limiters.snapshot.allow(Instant::now()) {
        ctx.stats.snapshot_rate_limited.fetch_add(1, ORDER);
        tracing::warn!("a snapshot request was rate limited");
        return Reply::Json(Response::status(429, NAME), Vec::new());
    }
    // ZooKeeper's default is to stream; only `streaming=false` (Boolean.parseBoolean) not.
    let streaming = query_value(query, "streaming").is_none_or(|v| v.eq_ignore_ascii_case("true"));
    // The copy is taken between two applies, as the snapshots Raft takes; the encoding runs
    // off the replica's lock.
    let state = ctx.replica().state().clone();
    let written =
        tokio::task::spawn_blocking(move || warden_import::snapshot_writer::write(&state)).await;
    let written = match written {
        Ok(written) => written,
        Err(e) => {
            ctx.stats.snapshot_errors.fetch_add(1, ORDER);
            tracing::warn!(error = %e, "the snapshot command failed");
            return Reply::Json(Response::status(500, NAME), Vec::new());
        }
    };
    tracing::info!(
        zxid = format_args!("{:#x}", written.zxid),
        znodes = written.znodes,
        bytes = written.bytes.len(),
        streaming,
        "snapshot taken for the admin snapshot command"
    );
    let headers = vec![
        ("last_zxid", format!("0x{:x}", written.zxid)),
        ("snapshot_size", written.bytes.len().to_string()),
    ];
    if streaming {
        Reply::Bytes(written.bytes, headers)
    } else {
        Reply::Json(Response::status(200, NAME), headers)
    }
}

/// `POST restore` with a ZooKeeper snapshot as the body: the whole state replaced by it, on
/// every member, through one log entry.
pub async fn restore(
    ctx: &Arc<Context>,
    authorization: Option<&str>,
    body: axum::body::Body,
) -> Reply {
    const NAME: &str = "restore";
    let started = Instant::now();
    if let Err(refused) = admit(ctx, NAME, authorization) {
        return Reply::Json(refused, Vec::new());
    }
    if !ctx.config.admin.restore_enabled {
        tracing::warn!("the restore command is disabled (admin.restore.enabled)");
        return Reply::Json(Response::status(503, NAME), Vec::new());
    }
    if !ctx.admin_limiters.restore.allow(started) {
        ctx.stats.restore_rate_limited.fetch_add(1, ORDER);
        tracing::warn!("a restore request was rate limited");
        return Reply::Json(Response::status(429, NAME), Vec::new());
    }
    let answer = match replace_state(ctx, body).await {
        Ok(zxid) => {
            let ms = started.elapsed().as_millis() as u64;
            ctx.stats.restore_ms.record(ms);
            tracing::info!(
                zxid = format_args!("{zxid:#x}"),
                ms,
                "state restored from a snapshot"
            );
            let mut fields = super::json::Object::new();
            fields.put("last_zxid", zxid);
            Response::with_fields(200, NAME, fields)
        }
        Err((status, why)) => {
            ctx.stats.restore_errors.fetch_add(1, ORDER);
            tracing::warn!(status, error = %why, "the restore command failed");
            Response::failed(status, NAME, why)
        }
    };
    Reply::Json(answer, Vec::new())
}

const ORDER: std::sync::atomic::Ordering = std::sync::atomic::Ordering::Relaxed;

/// Reads, checks and proposes the snapshot; the zxid after it was applied here, or the HTTP
/// status and why.
async fn replace_state(ctx: &Arc<Context>, body: axum::body::Body) -> Result<i64, (u16, String)> {
    if ctx.replica().state().mirroring() {
        // The mirror's tree is ZooKeeper's until the promotion: a restore would end the
        // mirroring behind the observer's back.
        return Err((
            409,
            "this server mirrors a ZooKeeper ensemble (docs/migration.md): promote it first".into(),
        ));
    }
    if !ctx.consensus.is_leader() {
        let leader = ctx
            .consensus
            .leader()
            .map_or("none known".into(), |id| format!("server {id}"));
        return Err((
            503,
            format!(
                "this server does not lead the cluster ({leader} does): send restore to the leader"
            ),
        ));
    }
    let bytes_max = usize::try_from(ctx.config.admin.restore_bytes_max).unwrap_or(usize::MAX);
    let body = axum::body::to_bytes(body, bytes_max).await.map_err(|e| {
        (
            413,
            format!("the body was not read whole (admin restore_bytes_max is {bytes_max}): {e}"),
        )
    })?;
    if body.is_empty() {
        return Err((400, "no snapshot in the body".into()));
    }
    let config = StateConfig {
        ttl_enabled: ctx.config.extended_types_enabled,
    };
    let entry_bytes_max = ctx.config.cluster.peer_frame_bytes_max as usize / 2;
    let snapshot = tokio::task::spawn_blocking(move || {
        let restore = warden_import::snapshot::parse_received(&body, bytes_max, config)
            .map_err(|e| (400, e.to_string()))?;
        let (state, _) = restore.finish();
        let encoded = warden_state::snapshot::encode(&state);
        if encoded.len() > entry_bytes_max {
            return Err((
                413,
                format!(
                    "the restored state takes {} bytes as a log entry, more than half of \
                     cluster.peer_frame_bytes_max ({entry_bytes_max} bytes), and could not be \
                     replicated: raise it on every server",
                    encoded.len()
                ),
            ));
        }
        Ok(encoded)
    })
    .await
    .map_err(|e| (500, e.to_string()))??;
    let proposal = Proposal::own(0, TxnKind::Restore { snapshot });
    ctx.consensus
        .propose_and_wait(proposal, None)
        .await
        .map_err(|e| (503, format!("the restore was not committed: {e}")))
}

/// What ZooKeeper checks before it runs either command: that the server serves, and the
/// `Authorization` header (`Commands.handleAuthentication`, `handleAuthorization`).
fn admit(ctx: &Context, name: &'static str, authorization: Option<&str>) -> Result<(), Response> {
    if !facts::answering(ctx) {
        return Err(commands::not_serving(name));
    }
    let Some(authorization) = authorization.filter(|a| !a.trim().is_empty()) else {
        return Err(Response::failed(
            401,
            name,
            "Auth info is missing for the command",
        ));
    };
    let ids = authenticate(authorization, ctx.config.super_digest.as_deref())
        .ok_or_else(|| Response::failed(401, name, "Not authenticated"))?;
    let root_acl: Vec<Acl> = ctx.replica().state().tree().root().acl().to_vec();
    if !authorized(&root_acl, &ids) {
        return Err(Response::failed(403, name, "Not authorized"));
    }
    Ok(())
}

/// `scheme auth` as ZooKeeper splits it: only the digest scheme is served (ip and x509 need
/// the peer's address or certificate, which the admin server does not take).
fn authenticate(authorization: &str, super_digest: Option<&str>) -> Option<Vec<warden_proto::Id>> {
    let parts: Vec<&str> = authorization.split(' ').filter(|p| !p.is_empty()).collect();
    match parts.as_slice() {
        ["digest", user_password] if user_password.contains(':') => {
            Some(acl::authenticate_digest(user_password, super_digest))
        }
        _ => None,
    }
}

/// Every permission bit on `/`, each checked on its own (`handleAuthorization`).
fn authorized(root_acl: &[Acl], ids: &[warden_proto::Id]) -> bool {
    (0..5)
        .map(|bit| 1 << bit)
        .filter(|bit| perms::ALL & bit != 0)
        .all(|bit| acl::permits(root_acl, bit, ids))
}

/// The first value of `key` in a query string (ZooKeeper hands commands the first).
fn query_value<'q>(query: Option<&'q str>, key: &str) -> Option<&'q str> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use warden_proto::Id;

    #[test]
    fn one_request_per_interval() {
        let limiter = RateLimiter::new(Duration::from_millis(300));
        let t = Instant::now();
        assert!(limiter.allow(t));
        assert!(!limiter.allow(t + Duration::from_millis(300)));
        assert!(limiter.allow(t + Duration::from_millis(301)));
        assert!(!limiter.allow(t + Duration::from_millis(302)));
    }

    #[test]
    fn the_snapshot_interval_is_read_in_microseconds_as_zookeeper_does() {
        let limiters = Limiters::new(&Admin::default());
        assert_eq!(limiters.snapshot.interval, Duration::from_millis(300));
        assert_eq!(limiters.restore.interval, Duration::from_secs(300));
    }

    #[test]
    fn only_a_digest_with_every_permission_on_the_root_is_let_in() {
        let ids = authenticate("digest root:pw", None).unwrap();
        assert!(authorized(&Acl::open(), &ids));
        assert!(!authorized(&Acl::read_only(), &ids));
        let mine = vec![Acl {
            perms: perms::ALL,
            id: Id::new("digest", acl::digest("root:pw")),
        }];
        assert!(authorized(&mine, &ids));
        let other = authenticate("digest eve:pw", None).unwrap();
        assert!(!authorized(&mine, &other));
        let split = vec![
            Acl {
                perms: perms::ALL & !perms::ADMIN,
                id: mine[0].id.clone(),
            },
            Acl {
                perms: perms::ADMIN,
                id: Id::new("world", "anyone"),
            },
        ];
        assert!(authorized(&split, &ids), "each bit from any entry");
        for bad in [
            "digest",
            "basic abc",
            "digest nopassword",
            "ip",
            "digest a:b c",
        ] {
            assert!(authenticate(bad, None).is_none(), "{bad}");
        }
    }

    #[test]
    fn the_first_value_of_a_query_key() {
        assert_eq!(
            query_value(Some("streaming=false"), "streaming"),
            Some("false")
        );
        assert_eq!(
            query_value(Some("a=1&streaming=x&streaming=true"), "streaming"),
            Some("x")
        );
        assert_eq!(query_value(Some("a=1"), "streaming"), None);
        assert_eq!(query_value(None, "streaming"), None);
    }
}
