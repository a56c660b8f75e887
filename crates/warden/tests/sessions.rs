//! Sessions over real connections: resume with id and password after a disconnect, expiry of
//! a silent session (its ephemerals deleted, watchers told), closeSession, the refusal of a
//! client that has seen a later zxid, sessions surviving a server restart, and handshakes
//! beyond the connection throttle.

mod support;

use std::io::Write;
use std::time::Duration;

use support::warden::{
    Warden, client, closed_by_server, connect_response, ephemeral, frame, handshake, persistent,
    read_frame,
};
use warden_proto::request::CreateRequest;
use warden_proto::types::{Acl, Id, perms};
use warden_proto::{ErrorCode, Reader, Record, ReplyHeader, Request};
use zookeeper_client as zk;

fn ephemeral_create(path: &str) -> Request {
    Request::Create(CreateRequest {
        path: path.into(),
        data: Some(b"x".to_vec()),
        acl: vec![Acl {
            perms: perms::ALL,
            id: Id::new("world", "anyone"),
        }],
        flags: 1, // ephemeral
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_resumes_on_a_new_connection_with_its_id_and_password() {
    let warden = Warden::start("");
    let observer = client(&warden).await;
    // A raw client creates a session and an ephemeral, then its connection drops.
    let mut first = warden.raw();
    first.write_all(&handshake(0, &[0; 16], 10_000, 0)).unwrap();
    let session = connect_response(&read_frame(&mut first).unwrap());
    first
        .write_all(&frame(&ephemeral_create("/eph").encode_frame(1)))
        .unwrap();
    read_frame(&mut first).unwrap();
    drop(first);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stat = observer.check_stat("/eph").await.unwrap();
    assert_eq!(stat.unwrap().ephemeral_owner, session.session_id);

    // Resumed on a new connection with the id and password: same session, same ephemeral.
    let mut second = warden.raw();
    second
        .write_all(&handshake(session.session_id, &session.password, 10_000, 0))
        .unwrap();
    let resumed = connect_response(&read_frame(&mut second).unwrap());
    assert_eq!(resumed.session_id, session.session_id);
    assert_eq!(resumed.timeout_ms, 10_000);
    second
        .write_all(&frame(&ephemeral_create("/eph2").encode_frame(2)))
        .unwrap();
    let reply = read_frame(&mut second).unwrap();
    let header = ReplyHeader::decode(&mut Reader::new(&reply)).unwrap();
    assert_eq!((header.xid, header.err), (2, ErrorCode::OK));
    assert_eq!(
        observer
            .check_stat("/eph2")
            .await
            .unwrap()
            .unwrap()
            .ephemeral_owner,
        session.session_id
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_session_expires_and_its_ephemerals_go_with_watchers_told() {
    let warden = Warden::start("");
    let observer = client(&warden).await;
    observer.create("/s", b"", &persistent()).await.unwrap();

    // A raw client: handshake with a 2 s timeout, create an ephemeral, then say nothing.
    let mut raw = warden.raw();
    raw.write_all(&handshake(0, &[0; 16], 2000, 0)).unwrap();
    let answer = connect_response(&read_frame(&mut raw).unwrap());
    assert_eq!(answer.timeout_ms, 2000, "tickTime=1000 allows 2000..20000");
    assert_ne!(answer.session_id, 0);
    raw.write_all(&frame(&ephemeral_create("/s/gone").encode_frame(1)))
        .unwrap();
    read_frame(&mut raw).unwrap();

    let (stat, watcher) = observer.check_and_watch_stat("/s/gone").await.unwrap();
    assert_eq!(stat.unwrap().ephemeral_owner, answer.session_id);
    let started = std::time::Instant::now();
    let event = tokio::time::timeout(Duration::from_secs(15), watcher.changed())
        .await
        .expect("the watch fires when the session expires");
    assert_eq!(event.event_type, zk::EventType::NodeDeleted);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(1500),
        "expired after only {waited:?}, before its 2 s timeout"
    );
    assert!(observer.check_stat("/s/gone").await.unwrap().is_none());
    // The expired session's connection is closed, and resuming it is refused.
    assert!(closed_by_server(&mut raw));
    let mut again = warden.raw();
    again
        .write_all(&handshake(answer.session_id, &answer.password, 2000, 0))
        .unwrap();
    let refused = connect_response(&read_frame(&mut again).unwrap());
    assert_eq!((refused.session_id, refused.timeout_ms), (0, 0));
    assert!(closed_by_server(&mut again));
    assert!(warden.log().contains("session expired"), "{}", warden.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_treated_as_an_expired_session() {
    let warden = Warden::start("");
    let zk = client(&warden).await;
    let id = zk.session_id().0;
    let mut raw = warden.raw();
    raw.write_all(&handshake(id, &[7; 16], 10_000, 0)).unwrap();
    let refused = connect_response(&read_frame(&mut raw).unwrap());
    assert_eq!((refused.session_id, refused.timeout_ms), (0, 0));
    assert!(closed_by_server(&mut raw));
    // The real owner is unaffected.
    zk.create("/still-mine", b"", &ephemeral()).await.unwrap();
}

#[test]
fn a_client_that_has_seen_a_later_zxid_is_refused_without_an_answer() {
    let warden = Warden::start("");
    let mut first = warden.raw();
    first.write_all(&handshake(0, &[0; 16], 10_000, 0)).unwrap();
    let session = connect_response(&read_frame(&mut first).unwrap());
    let mut raw = warden.raw();
    raw.write_all(&handshake(
        session.session_id,
        &session.password,
        10_000,
        1 << 40,
    ))
    .unwrap();
    assert!(closed_by_server(&mut raw));
    assert!(warden.log().contains("has seen zxid"), "{}", warden.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_session_deletes_ephemerals_at_once() {
    let warden = Warden::start("");
    let observer = client(&warden).await;
    let owner = client(&warden).await;
    owner.create("/e", b"", &ephemeral()).await.unwrap();
    let (_, watcher) = observer.check_and_watch_stat("/e").await.unwrap();
    drop(owner); // zookeeper-client sends closeSession when the last handle goes
    let event = tokio::time::timeout(Duration::from_secs(5), watcher.changed())
        .await
        .expect("deleted well before any timeout");
    assert_eq!(event.event_type, zk::EventType::NodeDeleted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_and_their_ephemerals_survive_a_server_restart() {
    let mut warden = Warden::start("");
    let zk = client(&warden).await;
    zk.create("/kept", b"", &ephemeral()).await.unwrap();
    let session = zk.session().clone();
    let status = warden.terminate();
    assert!(status.success(), "SIGTERM exits cleanly: {status}");
    assert!(
        warden.log().contains("SIGTERM received"),
        "{}",
        warden.log()
    );
    warden.restart();
    let resumed = zk::Client::connector()
        .with_session(session)
        .with_session_timeout(Duration::from_secs(10))
        .connect(&warden.connect_string())
        .await
        .expect("the session is still alive after the restart");
    assert!(resumed.check_stat("/kept").await.unwrap().is_some());
}

#[test]
fn handshakes_beyond_the_connection_throttle_are_refused_until_it_refills() {
    // A bucket of 3 handshakes, one more every 1.5 s.
    let metrics_port = support::servers::free_port();
    let warden = Warden::start(&format!(
        "connection_throttle_tokens=3\nconnection_throttle_fill_time=1500\n\
         connection_throttle_fill_count=1\n\
         metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider\n\
         metricsProvider.httpHost=127.0.0.1\nmetricsProvider.httpPort={metrics_port}\n"
    ));
    let first: Vec<_> = (0..3).map(|_| warden.raw_session()).collect();
    let mut refused = warden.raw();
    refused
        .write_all(&handshake(0, &[0; 16], 10_000, 0))
        .unwrap();
    assert!(
        closed_by_server(&mut refused),
        "a fourth handshake within the burst was answered"
    );
    // A resumed session costs a token too.
    let mut resumed = warden.raw();
    resumed
        .write_all(&handshake(1, &[0; 16], 10_000, 0))
        .unwrap();
    assert!(closed_by_server(&mut resumed));
    let metrics = support::http::get(([127, 0, 0, 1], metrics_port).into(), "/metrics", &[])
        .unwrap()
        .body;
    assert!(
        metrics.lines().any(|l| l == "connection_rejected 2.0"),
        "{metrics}"
    );
    assert_eq!(
        warden.log().matches("limits.connection_throttle").count(),
        1,
        "refusals are logged at most once a second"
    );
    // After a refill, one more gets in; the sessions let in before are untouched.
    std::thread::sleep(Duration::from_millis(1600));
    let _later = warden.raw_session();
    drop(first);
}
