//! Required authentication and the `sasl` ACL scheme, as ZooKeeper 3.9 does them: a session
//! that has not authenticated with one of `enforce.auth.schemes` gets
//! SessionClosedRequireSaslAuth (-124) for any request but auth and SASL, and its connection is
//! closed (`AuthenticationHelper.enforceAuthentication`); ACLs may name `sasl` ids only with
//! ZooKeeper's SASLAuthenticationProvider configured (`fixupACL`). The SASL exchange itself is
//! checked by real clients: kazoo's test_sasl.py and zkCli (scripts/compat).

mod support;

use std::io::Write;

use support::http;
use support::servers::{free_port, warden_command};
use support::warden::{Warden, client, closed_by_server, persistent, read_frame};
use warden_proto::request::{AuthRequest, PathWatchRequest};
use warden_proto::{ErrorCode, Reader, Record, ReplyHeader, Request, frame};
use zookeeper_client::{Acl, Acls, AuthId, CreateMode, Permission};

fn send(raw: &mut std::net::TcpStream, xid: i32, request: Request) -> ReplyHeader {
    raw.write_all(&frame::encode_frame(&request.encode_frame(xid)))
        .unwrap();
    ReplyHeader::decode(&mut Reader::new(&read_frame(raw).unwrap())).unwrap()
}

fn get_root() -> Request {
    Request::GetData(PathWatchRequest {
        path: "/".into(),
        watch: false,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_must_authenticate_with_a_required_scheme_first() {
    let warden = Warden::start("enforce.auth.enabled=true\nenforce.auth.schemes=digest\n");

    // A request before authenticating: -124, no body, then the connection is closed.
    let mut raw = warden.raw_session();
    let header = send(&mut raw, 1, get_root());
    assert_eq!(
        (header.xid, header.err),
        (1, ErrorCode::SESSION_CLOSED_REQUIRE_SASL_AUTH)
    );
    assert!(closed_by_server(&mut raw), "unauthenticated request");

    // After a digest auth, requests are served.
    let mut raw = warden.raw_session();
    let auth = Request::Auth(AuthRequest {
        auth_type: 0,
        scheme: "digest".into(),
        auth: b"user:password".to_vec(),
    });
    let header = send(&mut raw, -4, auth);
    assert_eq!(header.err, ErrorCode::OK);
    let header = send(&mut raw, 2, get_root());
    assert_eq!((header.xid, header.err), (2, ErrorCode::OK));

    // A real client that authenticates as it connects works as usual.
    let client = zookeeper_client::Client::connector()
        .with_auth("digest", b"user:password")
        .connect(&warden.connect_string())
        .await
        .unwrap();
    client.create("/x", b"1", &persistent()).await.unwrap();
    assert!(
        warden.log().contains("required schemes"),
        "{}",
        warden.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_acls_need_zookeepers_sasl_provider() {
    let sasl_acl = |id: &str| vec![Acl::new(Permission::ALL, AuthId::new("sasl", id))];
    let without = Warden::start("");
    let c = client(&without).await;
    let acl = sasl_acl("jaasuser");
    let options = CreateMode::Persistent.with_acls(Acls::new(&acl));
    assert_eq!(
        c.create("/s", b"", &options).await.unwrap_err(),
        zookeeper_client::Error::InvalidAcl
    );

    let with = Warden::start(
        "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n",
    );
    let c = client(&with).await;
    c.create("/s", b"", &options).await.unwrap();
    // Not jaasuser: no access (NoAuth), as in ZooKeeper.
    assert_eq!(
        c.get_data("/s").await.unwrap_err(),
        zookeeper_client::Error::NoAuth
    );
    // A principal that is no Kerberos name is an invalid id.
    let bad = sasl_acl("a@b@c");
    let options = CreateMode::Persistent.with_acls(Acls::new(&bad));
    assert_eq!(
        c.create("/t", b"", &options).await.unwrap_err(),
        zookeeper_client::Error::InvalidAcl
    );
}

const JAAS: &str = "Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n  \
                    user_super=\"super_secret\"\n  user_jaasuser=\"jaas_password\";\n};\n";

#[test]
fn sasl_passwords_stay_out_of_logs_and_admin_outputs() {
    let jaas = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(jaas.path(), JAAS).unwrap();
    let flags = format!(
        "-Djava.security.auth.login.config={}",
        jaas.path().display()
    );
    let warden = Warden::start_with_jvm_flags(
        "authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider\n\
         superUser=super\n",
        &flags,
    );
    let mut outputs = vec![
        ("conf".to_owned(), warden.four_letter("conf")),
        ("envi".to_owned(), warden.four_letter("envi")),
        ("log".to_owned(), warden.log()),
    ];
    for command in ["configuration", "environment", "initial_configuration"] {
        let reply = http::get(warden.admin_addr(), &format!("/commands/{command}"), &[]).unwrap();
        assert_eq!(reply.status, 200, "{command}");
        outputs.push((command.to_owned(), reply.body));
    }
    for (name, text) in outputs {
        assert!(!text.is_empty(), "{name}");
        assert!(
            !text.contains("jaas_password") && !text.contains("super_secret"),
            "{name}:\n{text}"
        );
    }
    assert!(
        warden.log().contains("SASL DIGEST-MD5: 2 users"),
        "{}",
        warden.log()
    );
}

#[test]
fn a_bad_jaas_file_stops_the_start_naming_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let jaas = dir.path().join("jaas.conf");
    std::fs::write(&jaas, JAAS.replace("required", "mandatory")).unwrap();
    let cfg = dir.path().join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "dataDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n",
            dir.path().join("data").display(),
            free_port()
        ),
    )
    .unwrap();
    let output = warden_command(&cfg)
        .env(
            "SERVER_JVMFLAGS",
            format!("-Djava.security.auth.login.config={}", jaas.display()),
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("{}:2: expected the flag of", jaas.display())),
        "{stderr}"
    );
}
