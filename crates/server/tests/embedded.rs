//! Warden embedded in a test process (`warden_server::embed`): one server and a three-member
//! cluster, each talked to through the independent `zookeeper-client` crate.

use std::time::Duration;

use warden_server::embed::{EmbeddedCluster, EmbeddedServer, loopback_config};
use zookeeper_client::{Acls, Client, CreateMode, CreateOptions};

async fn connect(connect_string: &str) -> Client {
    Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(connect_string)
        .await
        .unwrap_or_else(|e| panic!("connecting to {connect_string}: {e}"))
}

fn persistent() -> CreateOptions<'static> {
    CreateMode::Persistent.with_acls(Acls::anyone_all())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_server_on_port_0_with_temporary_data() {
    let server = EmbeddedServer::start_temporary(loopback_config())
        .await
        .expect("the server starts");
    assert_ne!(server.client_addr().port(), 0, "the kernel's port, not 0");
    assert!(server.admin_addr().is_some_and(|a| a.port() != 0));
    let data_dir = server.data_dir().to_path_buf();
    assert!(data_dir.exists());

    let client = connect(&server.connect_string()).await;
    client
        .create("/embedded", b"hello", &persistent())
        .await
        .expect("create");
    let (data, _) = client.get_data("/embedded").await.expect("get_data");
    assert_eq!(data, b"hello");

    server.stop().await;
    assert!(
        !data_dir.exists(),
        "the temporary data directory is removed at stop"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_in_one_process_are_independent() {
    let a = EmbeddedServer::start_temporary(loopback_config())
        .await
        .unwrap();
    let b = EmbeddedServer::start_temporary(loopback_config())
        .await
        .unwrap();
    assert_ne!(a.client_addr(), b.client_addr());
    let (on_a, on_b) = (
        connect(&a.connect_string()).await,
        connect(&b.connect_string()).await,
    );
    on_a.create("/only-on-a", b"", &persistent()).await.unwrap();
    assert!(on_b.check_stat("/only-on-a").await.unwrap().is_none());
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_member_cluster_in_one_process() {
    let mut cluster = EmbeddedCluster::start(3).await.expect("the cluster serves");
    assert_eq!(cluster.connect_string().split(',').count(), 3);
    let member = |cluster: &EmbeddedCluster, i: usize| cluster.member(i).unwrap().connect_string();

    // A write on one member, read back on another after sync.
    let first = connect(&member(&cluster, 0)).await;
    first.create("/shared", b"v1", &persistent()).await.unwrap();
    let third = connect(&member(&cluster, 2)).await;
    third.sync("/shared").await.unwrap();
    assert_eq!(third.get_data("/shared").await.unwrap().0, b"v1");

    // One member stops; the other two are a majority and go on serving.
    drop(first);
    cluster.stop_member(0).await;
    assert!(cluster.member(0).is_none());
    assert_eq!(cluster.connect_string().split(',').count(), 2);
    cluster
        .wait_until_serving(Duration::from_secs(30))
        .await
        .expect("the two left serve");
    let second = connect(&member(&cluster, 1)).await;
    second.set_data("/shared", b"v2", None).await.unwrap();
    third.sync("/shared").await.unwrap();
    assert_eq!(third.get_data("/shared").await.unwrap().0, b"v2");

    // Back on its data and ports, it catches up.
    cluster
        .restart_member(0)
        .await
        .expect("member 0 starts again");
    cluster
        .wait_until_serving(Duration::from_secs(30))
        .await
        .expect("all three serve");
    let first = connect(&member(&cluster, 0)).await;
    first.sync("/shared").await.unwrap();
    assert_eq!(first.get_data("/shared").await.unwrap().0, b"v2");

    cluster.stop().await;
}
