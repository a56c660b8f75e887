//! Bad input gets ZooKeeper's error or a closed connection with a log line saying why, never a
//! panic, and every other session carries on: a healthy client keeps working while garbage,
//! oversized, truncated and nonsensical frames arrive on other connections.

mod support;

use std::io::Write;
use std::time::Duration;

use support::warden::{Warden, client, closed_by_server, persistent, read_frame};
use warden_proto::request::{CreateRequest, PathWatchRequest};
use warden_proto::types::{Acl, Id, perms};
use warden_proto::{ErrorCode, Reader, Record, ReplyHeader, Request, frame};

fn reply_header(payload: &[u8]) -> ReplyHeader {
    ReplyHeader::decode(&mut Reader::new(payload)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_closes_only_the_offending_connection() {
    let warden = Warden::start("jute.maxbuffer=1048576\n");
    let healthy = client(&warden).await;
    healthy.create("/ok", b"0", &persistent()).await.unwrap();

    // A frame longer than the limit: closed before its body is read.
    let mut raw = warden.raw();
    raw.write_all(&(64 * 1024 * 1024u32).to_be_bytes()).unwrap();
    assert!(closed_by_server(&mut raw), "oversized frame");

    // A negative length.
    let mut raw = warden.raw();
    raw.write_all(&[0xff, 0xff, 0xff, 0xf0, 1, 2, 3]).unwrap();
    assert!(closed_by_server(&mut raw), "negative length");

    // A handshake that does not decode.
    let mut raw = warden.raw();
    raw.write_all(&frame::encode_frame(&[1, 2, 3])).unwrap();
    assert!(closed_by_server(&mut raw), "garbled handshake");

    // A request body that does not decode.
    let mut raw = warden.raw_session();
    raw.write_all(&frame::encode_frame(&[0, 0, 0, 1, 0, 0, 0, 4, 0xff]))
        .unwrap();
    assert!(closed_by_server(&mut raw), "garbled getData");

    // Half a frame, then the client goes away.
    let mut raw = warden.raw_session();
    raw.write_all(&[0, 0, 0, 100, 1, 2]).unwrap();
    drop(raw);

    // An unknown opcode: Unimplemented with zxid -1, then closed (ZooKeeper's answer).
    let mut raw = warden.raw_session();
    raw.write_all(&frame::encode_frame(&[0, 0, 0, 9, 0, 0, 3, 0xe7]))
        .unwrap();
    let header = reply_header(&read_frame(&mut raw).unwrap());
    assert_eq!(
        (header.xid, header.zxid, header.err),
        (9, -1, ErrorCode::UNIMPLEMENTED)
    );
    assert!(closed_by_server(&mut raw), "unknown opcode");

    // An invalid path is a request error (BadArguments, from validation as in ZooKeeper's
    // PrepRequestProcessor), not a reason to hang up.
    let mut raw = warden.raw_session();
    let bad_path = Request::Create(CreateRequest {
        path: "/ok/.".into(),
        data: None,
        acl: vec![Acl {
            perms: perms::ALL,
            id: Id::new("world", "anyone"),
        }],
        flags: 0,
    });
    raw.write_all(&frame::encode_frame(&bad_path.encode_frame(5)))
        .unwrap();
    let header = reply_header(&read_frame(&mut raw).unwrap());
    assert_eq!((header.xid, header.err), (5, ErrorCode::BAD_ARGUMENTS));
    let fine = Request::GetData(PathWatchRequest {
        path: "/ok".into(),
        watch: false,
    });
    raw.write_all(&frame::encode_frame(&fine.encode_frame(6)))
        .unwrap();
    let header = reply_header(&read_frame(&mut raw).unwrap());
    assert_eq!((header.xid, header.err), (6, ErrorCode::OK));

    // Random bytes straight away.
    for seed in 0..20u64 {
        let mut raw = warden.raw();
        let mut rng = fastrand::Rng::with_seed(seed);
        let bytes: Vec<u8> = (0..rng.usize(1..200)).map(|_| rng.u8(..)).collect();
        let _ = raw.write_all(&bytes);
        drop(raw);
    }

    // The healthy session never noticed.
    for i in 1..=20 {
        healthy
            .set_data("/ok", i.to_string().as_bytes(), None)
            .await
            .unwrap();
    }
    assert_eq!(healthy.get_data("/ok").await.unwrap().0, b"20");
    assert_eq!(warden.four_letter("ruok"), "imok");
    let log = warden.log();
    for reason in [
        "exceeds the limit",
        "negative",
        "malformed handshake",
        "malformed request",
        "unknown opcode",
    ] {
        assert!(
            log.contains(reason),
            "no log line saying {reason:?}:\n{log}"
        );
    }
    assert!(!log.contains("panicked"), "{log}");
    tokio::time::sleep(Duration::from_millis(10)).await;
}

/// The JAAS file of kazoo's SASL tests, and the zoo.cfg line that enables the `sasl` scheme.
const JAAS: &str = "Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  \
                    user_super=\"super_secret\"\n  user_jaasuser=\"jaas_password\";\n};\n";
const SASL_PROVIDER: &str =
    "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n";

/// Sends a SASL token (opcode 102) and reads the reply: its header and, when the reply has one,
/// its SetSASLResponse token (None for the null token ZooKeeper sends on failure).
fn sasl(raw: &mut std::net::TcpStream, xid: i32, token: &[u8]) -> (ReplyHeader, Option<Vec<u8>>) {
    let request = Request::Sasl(warden_proto::request::SaslRequest {
        token: token.to_vec(),
    });
    raw.write_all(&frame::encode_frame(&request.encode_frame(xid)))
        .unwrap();
    let payload = read_frame(raw).expect("the SASL token is answered");
    let mut r = Reader::new(&payload);
    let header = ReplyHeader::decode(&mut r).unwrap();
    (header, Option::<Vec<u8>>::decode(&mut r).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbled_sasl_tokens_fail_only_their_connection() {
    let jaas = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(jaas.path(), JAAS).unwrap();
    let flags = format!(
        "-Djava.security.auth.login.config={}",
        jaas.path().display()
    );
    let warden = Warden::start_with_jvm_flags(SASL_PROVIDER, &flags);
    let healthy = client(&warden).await;
    healthy.create("/ok", b"0", &persistent()).await.unwrap();

    // The first token of DIGEST-MD5 is empty; the challenge is ZooKeeper's, without qop.
    let mut raw = warden.raw_session();
    let (header, challenge) = sasl(&mut raw, 1, b"");
    assert_eq!((header.xid, header.err), (1, ErrorCode::OK));
    let challenge = String::from_utf8(challenge.unwrap()).unwrap();
    assert!(
        challenge.starts_with("realm=\"zk-sasl-md5\",nonce=\"")
            && challenge.ends_with("\",charset=utf-8,algorithm=md5-sess"),
        "{challenge}"
    );
    // A response that does not parse: AuthFailed with a null token, then closed.
    let (header, token) = sasl(&mut raw, 2, b"username=\"jaasuser,nonce=");
    assert_eq!(
        (header.xid, header.err, token),
        (2, ErrorCode::AUTH_FAILED, None)
    );
    assert!(closed_by_server(&mut raw), "garbled digest-response");

    // A response to another challenge (replayed from the LIVE ZooKeeper exchange): refused.
    let mut raw = warden.raw_session();
    sasl(&mut raw, 1, b"");
    let replayed = b"qop=auth,realm=\"zk-sasl-md5\",username=\"jaasuser\",\
        nonce=\"QSdeJq0vVCjJDsy4rSgGZQAA7ZD2hpDSwrftprfR\",cnonce=\"06282851203099848\",\
        nc=00000001,digest-uri=\"zookeeper/zk-sasl-md5\",response=5105f2f9c444f3bf51d66ad4b48fc550";
    let (header, token) = sasl(&mut raw, 2, replayed);
    assert_eq!((header.err, token), (ErrorCode::AUTH_FAILED, None));
    assert!(closed_by_server(&mut raw), "replayed digest-response");

    // A first token that is not empty (DIGEST-MD5 has no initial response), and garbage.
    for token in [&b"username=\"jaasuser\""[..], &[0xff, 0, 1, 2]] {
        let mut raw = warden.raw_session();
        let (header, reply) = sasl(&mut raw, 1, token);
        assert_eq!((header.err, reply), (ErrorCode::AUTH_FAILED, None));
        assert!(closed_by_server(&mut raw), "bad first token {token:?}");
    }

    // An oversized token.
    let mut raw = warden.raw_session();
    sasl(&mut raw, 1, b"");
    let (header, _) = sasl(&mut raw, 2, &vec![b'a'; 64 * 1024]);
    assert_eq!(header.err, ErrorCode::AUTH_FAILED);
    assert!(closed_by_server(&mut raw), "oversized digest-response");

    // An addauth with a scheme the server does not have fails the same way.
    let mut raw = warden.raw_session();
    let auth = Request::Auth(warden_proto::request::AuthRequest {
        auth_type: 0,
        scheme: "kerberos".into(),
        auth: b"someone".to_vec(),
    });
    raw.write_all(&frame::encode_frame(&auth.encode_frame(-4)))
        .unwrap();
    let header = reply_header(&read_frame(&mut raw).unwrap());
    assert_eq!(header.err, ErrorCode::AUTH_FAILED);
    assert!(closed_by_server(&mut raw), "addauth with an unknown scheme");

    // Every refusal is counted, as ZooKeeper's auth_failed_count.
    let mntr = warden.four_letter("mntr");
    assert!(
        mntr.lines().any(|l| l == "zk_auth_failed_count\t6"),
        "{mntr}"
    );

    // The healthy session never noticed.
    healthy.set_data("/ok", b"1", None).await.unwrap();
    assert_eq!(healthy.get_data("/ok").await.unwrap().0, b"1");
    let log = warden.log();
    assert!(log.contains("SASL authentication failure"), "{log}");
    assert!(!log.contains("panicked"), "{log}");
    // Passwords are never logged.
    assert!(
        !log.contains("jaas_password") && !log.contains("super_secret"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_without_jaas_users_is_answered_as_zookeeper_does() {
    // No JAAS Server section: ZooKeeper answers OK with a null token and keeps the connection.
    let warden = Warden::start("");
    let mut raw = warden.raw_session();
    let (header, token) = sasl(&mut raw, 1, b"");
    assert_eq!((header.xid, header.err, token), (1, ErrorCode::OK, None));
    let exists = Request::Exists(PathWatchRequest {
        path: "/".into(),
        watch: false,
    });
    raw.write_all(&frame::encode_frame(&exists.encode_frame(2)))
        .unwrap();
    let header = reply_header(&read_frame(&mut raw).unwrap());
    assert_eq!((header.xid, header.err), (2, ErrorCode::OK));
}
