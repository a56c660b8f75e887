//! Dynamic reconfiguration: ZooKeeper's `reconfig` mapped onto Raft membership changes, and
//! `/zookeeper/config` kept equal to the membership.
//!
//! `/zookeeper/config` holds the membership the cluster means to have, in ZooKeeper's text
//! (`server.N=host:peerPort:electionPort:role;clientHost:clientPort` lines, then
//! `version=<hex zxid>`); the leader makes Raft's membership follow it. A reconfig runs on the
//! leader, in the order of its session's other writes:
//!
//! 1. checks, in ZooKeeper's order: reconfig enabled, `fromConfig` equals the current version,
//!    the request parses, the result has two voters (one with standaloneEnabled=false), a
//!    quorum of the new voters answers the leader now (`quorum_in_touch`), and the caller
//!    may write `/zookeeper/config` (super user or its ACL);
//! 2. the new members join (as learners, then as voters), members that leave stay for now;
//! 3. the new configuration is written to `/zookeeper/config` through the log: that entry
//!    answers the client, on its own server, in its session's order; every server that is
//!    still a member applies it, so a client of a leaving server is answered too;
//! 4. members that leave are removed.
//!
//! A failed check is answered through the log as well (a refused transaction, with the error
//! code ZooKeeper gives), so replies keep their order. If the leader fails between 2 and 4, the
//! next leader finds Raft's membership different from `/zookeeper/config` and finishes the
//! change ([`reconcile`]); a new cluster's first leader writes its founding membership there.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use warden_proto::request::ReconfigRequest;
use warden_proto::types::perms;
use warden_proto::{ErrorCode, Id, Request};
use warden_state::{TxnKind, acl, system};

use crate::config::{Member, Role};
use crate::consensus::{MemberAddr, MembershipError, Proposal, ProposeError};
use crate::server::Context;
use crate::zoo_cfg::parse_server_address;

/// The membership in ZooKeeper's text, without the version line.
pub fn render(members: &[Member]) -> String {
    members
        .iter()
        .map(|m| m.dynamic_config_line() + "\n")
        .collect()
}

/// Reads `/zookeeper/config`'s text: the members and the version (-1 when there is none).
pub fn parse(text: &str) -> Result<(Vec<Member>, i64), String> {
    let mut members = Vec::new();
    let mut version = -1;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(hex) = line.strip_prefix("version=") {
            version = i64::from_str_radix(hex, 16).map_err(|_| format!("bad version {hex:?}"))?;
        } else {
            members.push(parse_entry(line)?);
        }
    }
    Ok((members, version))
}

/// One `server.N=...` entry.
fn parse_entry(entry: &str) -> Result<Member, String> {
    let (key, value) = entry
        .split_once('=')
        .ok_or_else(|| format!("{entry:?} is not server.N=..."))?;
    let id = key
        .trim()
        .strip_prefix("server.")
        .and_then(|n| n.parse::<u64>().ok())
        .ok_or_else(|| format!("{key:?} is not server.N"))?;
    parse_server_address(id, value.trim())
}

/// Entries separated by commas (as zkCli and the Java client join them) or new lines.
fn parse_list(text: &str) -> Result<Vec<Member>, String> {
    text.split([',', '\n'])
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(parse_entry)
        .collect()
}

/// The members a reconfig request asks for, from the current ones, as ZooKeeper's
/// `PrepRequestProcessor` reads it: a new member list, or the current members less those
/// leaving (an id that is not a member is passed over) plus those joining (which must give
/// their client address).
fn requested(current: &[Member], r: &ReconfigRequest) -> Result<Vec<Member>, String> {
    if let Some(new) = r.new_members.as_deref().filter(|n| !n.trim().is_empty()) {
        return parse_list(new);
    }
    let mut members = current.to_vec();
    if let Some(leaving) = r.leaving_servers.as_deref() {
        for id in leaving.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let id: u64 = id
                .parse()
                .map_err(|_| format!("{id:?} is not a server id"))?;
            members.retain(|m| m.id != id);
        }
    }
    if let Some(joining) = r.joining_servers.as_deref() {
        for member in parse_list(joining)? {
            if member.client.is_none() {
                return Err(format!(
                    "server.{} has no client address: each joining server needs its three \
                     ports",
                    member.id
                ));
            }
            members.retain(|m| m.id != member.id);
            members.push(member);
        }
    }
    members.sort_by_key(|m| m.id);
    Ok(members)
}

/// Whether a proposal is a client's reconfig, which the leader carries out itself.
pub fn is_reconfig(proposal: &Proposal) -> bool {
    matches!(proposal.txn.kind, TxnKind::Request(Request::Reconfig(_)))
}

/// How consensus names a member.
pub fn member_addr(m: &Member) -> MemberAddr {
    MemberAddr {
        id: m.id,
        peer_addr: format!("{}:{}", m.host, m.peer_port),
        client_addr: m.client.as_ref().map(|c| c.to_string()).unwrap_or_default(),
        voter: m.role == Role::Participant,
    }
}

/// `/zookeeper/config` as this server has it: members and version.
pub fn current(ctx: &Context) -> (Vec<Member>, i64) {
    let text = ctx
        .replica()
        .state()
        .tree()
        .get(system::CONFIG)
        .and_then(|n| n.data().map(|d| String::from_utf8_lossy(d).into_owned()))
        .unwrap_or_default();
    parse(&text).unwrap_or_else(|e| {
        tracing::error!("/zookeeper/config does not parse ({e}); treating it as empty");
        (Vec::new(), -1)
    })
}

/// Whether `auth` may reconfigure: the super user, or WRITE on `/zookeeper/config`.
fn may_reconfigure(ctx: &Context, auth: &[Id]) -> bool {
    let replica = ctx.replica();
    let Some(node) = replica.state().tree().get(system::CONFIG) else {
        return false;
    };
    acl::permits(node.acl(), perms::WRITE, auth)
}

/// Carries out a client's reconfig on the leader (module doc) and answers it through the
/// log. `proposal` is the client's write, with its origin, handed over for `term` (if named:
/// nothing is done unless this server leads in it); `failed` is told if the answer cannot
/// enter the log (so the client's server hands it to the next leader, as any write).
/// Returns once the change is over.
pub async fn reconfig(
    ctx: &Arc<Context>,
    proposal: Proposal,
    term: Option<u64>,
    failed: impl FnOnce(ProposeError) + Send + 'static,
) {
    // In a task of its own, which the caller waits for: the caller is the client's connection
    // or a follower's channel, and either may close before the change is over (a reconfig
    // that removes this server closes its clients as it answers them). Dropped with it, the
    // change used to stop there: the members leaving were never removed, a leader that
    // removed itself went on leading, and every later reconfig found the slot taken. The
    // task ends with the server, as `reconcile` does.
    let stopping = ctx.clone();
    let change = carry_out(ctx.clone(), proposal, term, failed);
    let change = tokio::spawn(async move { stopping.until_stopped(change).await });
    if let Err(e) = change.await {
        tracing::error!("reconfig: the change's task failed: {e}");
    }
}

async fn carry_out(
    ctx: Arc<Context>,
    mut proposal: Proposal,
    term: Option<u64>,
    failed: impl FnOnce(ProposeError) + Send + 'static,
) {
    let ctx = &ctx;
    let TxnKind::Request(Request::Reconfig(request)) = &proposal.txn.kind else {
        unreachable!("only reconfig requests come here");
    };
    if let Some(term) = term
        && !ctx.consensus.leads_in(term)
    {
        failed(ProposeError::NotLeader {
            leader: ctx.consensus.leader(),
        });
        return;
    }
    let request = request.clone();
    // How long a reconfig waits for an earlier one to be over (`begin`, `change`) or for a new
    // leader to hear from its quorum (`quorum_in_touch`).
    let deadline = tokio::time::Instant::now() + 2 * ctx.consensus.election_timeout();
    let wanted = if !begin(ctx, deadline).await {
        Err(ErrorCode::RECONFIG_IN_PROGRESS)
    } else {
        let prepared = prepare(ctx, &request, &proposal.txn.auth, deadline).await;
        if prepared.is_err() {
            ctx.reconfiguring.store(false, Ordering::Release);
        }
        prepared
    };
    // Step 3 (or the refusal): the entry that answers the client, applied by every member of
    // either configuration.
    proposal.txn.kind = match &wanted {
        Ok(members) => TxnKind::Reconfigured {
            members: render(members),
        },
        Err(err) => TxnKind::Refused { err: *err },
    };
    if let Err(e) = ctx.consensus.propose_and_wait(proposal, term).await {
        failed(e);
    }
    let Ok(wanted) = wanted else {
        return;
    };
    // Step 4; finished by `reconcile` if it fails now.
    let final_members: Vec<MemberAddr> = wanted.iter().map(member_addr).collect();
    if let Err(e) = ctx.consensus.change_members(&final_members).await {
        tracing::warn!(error = %e, "reconfig: leaving members not removed yet");
    }
    ctx.reconfiguring.store(false, Ordering::Release);
    tokio::spawn(reconcile(ctx.clone()));
}

/// Takes the one reconfiguration slot. A change whose client was answered may still be
/// removing the members that left (step 4, usually a few milliseconds): a reconfig that comes
/// right after it waits for that, until `deadline`, rather than fail with ReconfigInProgress,
/// since to its client the earlier one is over.
async fn begin(ctx: &Context, deadline: tokio::time::Instant) -> bool {
    while ctx.reconfiguring.swap(true, Ordering::AcqRel) {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// Steps 1 and 2 of the module doc: the checks, then the new members joined. Returns the
/// members wanted, or the error code the client gets.
async fn prepare(
    ctx: &Arc<Context>,
    request: &ReconfigRequest,
    auth: &[Id],
    deadline: tokio::time::Instant,
) -> Result<Vec<Member>, ErrorCode> {
    if !ctx.config.cluster.reconfig_enabled || ctx.consensus.standalone() {
        return Err(ErrorCode::RECONFIG_DISABLED);
    }
    // In ZooKeeper's order (PrepRequestProcessor): the version, the arguments, the voters
    // left and the quorum are checked before the caller's right to reconfigure (kazoo's,
    // go-zookeeper's and zkCli's tests see the same errors from both). Like ZooKeeper, a
    // change to the members there already are is made (with a new version).
    let (members, version) = current(ctx);
    if request.cur_config_id != -1 && request.cur_config_id != version {
        return Err(ErrorCode::BAD_VERSION);
    }
    let wanted = requested(&members, request).map_err(|why| {
        tracing::info!("reconfig refused: {why}");
        ErrorCode::BAD_ARGUMENTS
    })?;
    // ZooKeeper: with standaloneEnabled, at least two voters (one would run standalone).
    let voters_min = if ctx.config.cluster.standalone_enabled {
        2
    } else {
        1
    };
    let voters: Vec<u64> = wanted
        .iter()
        .filter(|m| m.role == Role::Participant)
        .map(|m| m.id)
        .collect();
    if voters.len() < voters_min {
        tracing::info!("reconfig refused: fewer than {voters_min} voters would be left");
        return Err(ErrorCode::BAD_ARGUMENTS);
    }
    if !quorum_in_touch(ctx, &voters, deadline).await {
        return Err(ErrorCode::NEW_CONFIG_NO_QUORUM);
    }
    if !may_reconfigure(ctx, auth) {
        return Err(ErrorCode::NO_AUTH);
    }
    // Step 2: everyone of either configuration; the new voters vote, those that leave keep
    // their role until step 4.
    let mut during: Vec<MemberAddr> = wanted.iter().map(member_addr).collect();
    for old in members
        .iter()
        .filter(|old| !wanted.iter().any(|m| m.id == old.id))
    {
        during.push(member_addr(old));
    }
    change(ctx, &during, deadline).await?;
    Ok(wanted)
}

/// Whether a quorum of `voters` is in touch with this leader, as ZooKeeper's leader requires
/// of a new configuration: the leader and the members that answer it from now on (a member
/// that has just died, whose last answer is still recent, must not count: the joint
/// configuration would then wait for it, and with it every write). Waits until `deadline` for
/// them: a heartbeat interval, or on a leader elected a moment ago (a reconfig right after one
/// that removed its predecessor) until its followers first answer it.
async fn quorum_in_touch(ctx: &Context, voters: &[u64], deadline: tokio::time::Instant) -> bool {
    let me = ctx.consensus.node_id();
    let asked = std::time::Instant::now();
    loop {
        let answered = ctx.consensus.answered_since(asked);
        let in_touch = voters
            .iter()
            .filter(|id| **id == me || answered.contains(id))
            .count();
        if in_touch > voters.len() / 2 {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Applies a membership change, mapping its failure to ZooKeeper's error codes.
///
/// Raft refuses a change while the newest membership in the log is not committed. A leader
/// just elected holds its predecessor's last one uncommitted until its own first entry
/// commits: right after a reconfig that removed the leader, the next reconfig (its client was
/// answered, so to it the cluster is settled) reaches such a leader. That wait is a few
/// milliseconds, or longer on a busy machine; the change is retried until `deadline` before
/// the client gets ReconfigInProgress.
async fn change(
    ctx: &Context,
    members: &[MemberAddr],
    deadline: tokio::time::Instant,
) -> Result<(), ErrorCode> {
    loop {
        match ctx.consensus.change_members(members).await {
            Ok(()) => return Ok(()),
            Err(MembershipError::InProgress) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(MembershipError::InProgress) => return Err(ErrorCode::RECONFIG_IN_PROGRESS),
            Err(e) => {
                tracing::warn!(error = %e, "reconfig: the membership change failed");
                return Err(ErrorCode::NEW_CONFIG_NO_QUORUM);
            }
        }
    }
}

/// A new leader's duty, and after every reconfig: makes Raft's membership what
/// `/zookeeper/config` says (writing the founding membership there first if it is empty),
/// for as long as this server leads.
pub async fn reconcile(ctx: Arc<Context>) {
    // Until the server stops: a stopped server's last metrics may still say it leads, and
    // this task must not keep the server's state (its log, locked) alive.
    let stopping = ctx.clone();
    stopping.until_stopped(converge(ctx)).await
}

async fn converge(ctx: Arc<Context>) {
    while ctx.consensus.is_leader() {
        let (members, _) = current(&ctx);
        if members.is_empty() {
            let founding = render(&ctx.config.cluster.members);
            let write = Proposal::own(0, TxnKind::Reconfigured { members: founding });
            if let Err(e) = ctx.consensus.propose_and_wait(write, None).await {
                tracing::debug!(error = %e, "founding membership not written yet");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            continue;
        }
        let wanted: Vec<MemberAddr> = members.iter().map(member_addr).collect();
        let (voters, learners) = ctx.consensus.members();
        let in_sync = wanted.len() == voters.len() + learners.len()
            && wanted.iter().all(|m| {
                if m.voter {
                    voters.contains(&m.id)
                } else {
                    learners.contains(&m.id)
                }
            });
        if in_sync {
            return;
        }
        if ctx.reconfiguring.swap(true, Ordering::AcqRel) {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        let changed = ctx.consensus.change_members(&wanted).await;
        ctx.reconfiguring.store(false, Ordering::Release);
        match changed {
            Ok(()) => tracing::info!("membership now follows /zookeeper/config"),
            Err(e) => {
                tracing::debug!(error = %e, "membership not reconciled yet");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}
