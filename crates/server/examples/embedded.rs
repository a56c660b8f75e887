//! A host program with a Warden server inside it: start it on a free port with its data in a
//! temporary directory, talk to it through the `zookeeper-client` crate, stop it.
//!
//! `cargo run -p warden-server --example embedded`

use std::time::Duration;

use warden_server::embed::{EmbeddedServer, loopback_config};
use zookeeper_client::{Acls, Client, CreateMode};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = EmbeddedServer::start_temporary(loopback_config()).await?;
    println!("Warden serving on {}", server.connect_string());

    let client = Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(&server.connect_string())
        .await?;
    let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
    client
        .create("/greeting", b"hello from the host", &options)
        .await?;
    let (data, stat) = client.get_data("/greeting").await?;
    println!(
        "/greeting = {:?} (zxid {:#x})",
        String::from_utf8_lossy(&data),
        stat.czxid
    );

    drop(client);
    server.stop().await;
    println!("stopped; the temporary data directory is gone");
    Ok(())
}
