//! Sessions, the cluster and the live figures, as the console shows them: drawn from the
//! facts the admin commands report (`dump`, `wchc`, `cons`, `srvr`, `mntr`, `voting_view`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::extract::{RawQuery, State};
use axum::response::Response;
use serde_json::{Value, json};

use super::{ApiError, Query, answer, session_hex};
use crate::admin::{facts, process};
use crate::config::Role;
use crate::server::Context;

/// Sessions listed at most.
pub const SESSIONS_SHOWN_MAX: usize = 1000;
const SESSIONS_SHOWN_DEFAULT: usize = 100;
/// Ephemeral paths, and watched paths, listed per session at most.
pub const PATHS_PER_SESSION_MAX: usize = 100;

/// `GET /console/api/sessions?limit=`: every session (the first `limit`, in id order) with its
/// timeout, its connection to this server if it has one, when this server expires it if it
/// tracks it, its ephemeral nodes and the paths it watches here.
pub async fn sessions(State(ctx): State<Arc<Context>>, RawQuery(raw): RawQuery) -> Response {
    let run = || -> Result<Value, ApiError> {
        let q = Query::parse(raw, &["limit"])?;
        let limit = q.count("limit", SESSIONS_SHOWN_DEFAULT, SESSIONS_SHOWN_MAX)?;
        let dump = facts::dump(&ctx);
        let watches: HashMap<i64, Vec<String>> = facts::watches_by_session(&ctx.replica())
            .into_iter()
            .collect();
        let connections: HashMap<i64, facts::Connection> = facts::connections(&ctx.replica())
            .into_iter()
            .map(|c| (c.session_id, c))
            .collect();
        let expiry: HashMap<i64, u64> = dump
            .expiry
            .iter()
            .flat_map(|(at, ids)| ids.iter().map(move |id| (*id, *at)))
            .collect();
        let ephemerals: HashMap<i64, Vec<String>> = dump.ephemerals.into_iter().collect();
        let shown = &dump.sessions[..dump.sessions.len().min(limit)];
        let timeouts: Vec<Option<i32>> = {
            let r = ctx.replica();
            shown
                .iter()
                .map(|id| r.state().session(*id).map(|s| s.timeout_ms))
                .collect()
        };
        let capped = |paths: Option<&Vec<String>>| {
            let paths = paths.map(Vec::as_slice).unwrap_or_default();
            json!({
                "total": paths.len(),
                "paths": &paths[..paths.len().min(PATHS_PER_SESSION_MAX)],
            })
        };
        let list: Vec<Value> = shown
            .iter()
            .zip(timeouts)
            .map(|(id, timeout)| {
                json!({
                    "id": session_hex(*id),
                    "timeout_ms": timeout,
                    "expires_at_ms": expiry.get(id),
                    "connection": connections.get(id).map(|c| json!({
                        "peer": c.peer.to_string(),
                        "outstanding": c.outstanding,
                        "received": c.stats.received,
                        "sent": c.stats.sent,
                        "last_operation": facts::op_name(c.stats.last_op),
                    })),
                    "ephemerals": capped(ephemerals.get(id)),
                    "watches": capped(watches.get(id)),
                })
            })
            .collect();
        Ok(json!({
            "total": dump.sessions.len(),
            "sessions": list,
            "uptime_ms": ctx.started.elapsed().as_millis() as u64,
            "paths_per_session_max": PATHS_PER_SESSION_MAX,
        }))
    };
    answer(run())
}

/// `GET /console/api/cluster`: this server's place in the cluster (its role, term, zxid, log
/// indexes, and how far its applied index is behind the cluster's commit), then every member
/// with its role and, as the leader knows it, the log index it holds and how far behind it is.
pub async fn cluster(State(ctx): State<Arc<Context>>) -> Response {
    let mode = facts::mode(&ctx);
    let status = ctx.consensus.status();
    let log = ctx.consensus.log_info().await;
    let replication = ctx.consensus.replication();
    let me = ctx.consensus.node_id();
    let zxid = ctx.replica().state().last_zxid();
    let members = facts::members(&ctx);
    let role_of = |id: u64| {
        if status.leader == Some(id) {
            "leader"
        } else if status.learners.contains(&id) {
            "observer"
        } else if status.voters.contains(&id) {
            "follower"
        } else {
            "not a member"
        }
    };
    let member =
        |id: u64, client: Option<String>, peer: Option<String>, configured: Option<Role>| {
            let matched = if id == me && status.leader == Some(me) {
                Some(status.last_log_index)
            } else {
                replication.as_ref().and_then(|r| r.get(&id).copied())
            };
            json!({
                "id": id,
                "me": id == me,
                "role": role_of(id),
                "voting": configured.map(|r| r == Role::Participant),
                "client_address": client,
                "peer_address": peer,
                "matched_index": matched,
                "lag_entries": matched.map(|m| status.last_log_index.saturating_sub(m)),
                "synced": status.leader == Some(id) || status.synced_followers.contains(&id),
            })
        };
    let list: Vec<Value> = if members.is_empty() {
        vec![member(me, Some(ctx.client_addr.to_string()), None, None)]
    } else {
        members
            .iter()
            .map(|m| {
                member(
                    m.id,
                    m.client.as_ref().map(ToString::to_string),
                    Some(crate::config::HostPort::new(m.host.clone(), m.peer_port).to_string()),
                    Some(m.role),
                )
            })
            .collect()
    };
    let body = json!({
        "me": me,
        "mode": mode,
        "standalone": ctx.consensus.standalone(),
        "serving": ctx.serving(),
        "leader": status.leader,
        "term": status.term,
        "zxid": zxid,
        "zxid_hex": format!("{zxid:#x}"),
        "last_log_index": status.last_log_index,
        "committed_index": status.committed_index,
        "cluster_committed_index": log.cluster_committed_index,
        "applied_index": status.applied_index,
        "snapshot_index": status.snapshot_index,
        "applied_lag_entries": log.cluster_committed_index.saturating_sub(status.applied_index),
        "leader_view": replication.is_some(),
        "members": list,
    });
    answer(Ok(body))
}

/// `GET /console/api/live`: the counters the charts poll every second (requests and replies
/// since the start, latencies, commits, memory); the page draws rates from their differences.
pub async fn live(State(ctx): State<Arc<Context>>) -> Response {
    let s = facts::summary(&ctx);
    let w = facts::watch_summary(&ctx.replica());
    let sessions = ctx.replica().state().sessions().count();
    let (timed, total_us) = ctx.stats.latency.count_total_us();
    let quantiles = [0.5, 0.99];
    let summary = |snapshot: crate::stats::SummarySnapshot| {
        let q = |i: usize| snapshot.quantiles.get(i).and_then(|(_, v)| *v);
        json!({ "count": snapshot.count, "sum_ms": snapshot.sum, "p50_ms": q(0), "p99_ms": q(1) })
    };
    let body = json!({
        "uptime_ms": s.uptime_ms,
        "mode": s.mode,
        "serving": ctx.serving(),
        "packets_received": s.packets_received,
        "packets_sent": s.packets_sent,
        "commits": ctx.stats.commits.load(Ordering::Relaxed),
        "latency_ms": { "min": s.latency_min_ms, "avg": s.latency_avg_ms, "max": s.latency_max_ms },
        "latency_count": timed,
        "latency_total_us": total_us,
        "reads": summary(ctx.stats.read_latency_ms.snapshot(&quantiles)),
        "writes": summary(ctx.stats.write_latency_ms.snapshot(&quantiles)),
        "resident_bytes": process::look().resident_bytes,
        "znodes": s.node_count,
        "zxid": s.zxid,
        "connections": s.connections,
        "outstanding": s.outstanding,
        "sessions": sessions,
        "watches": w.watches,
    });
    answer(Ok(body))
}
