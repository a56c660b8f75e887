//! A loopback TCP proxy whose connections a test can cut, and which can refuse new ones for a
//! while: a client behind it loses its connection but not its session.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinHandle};

pub struct Proxy {
    address: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

struct Shared {
    refusing: AtomicBool,
    connections: Mutex<Vec<AbortHandle>>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards every connection to `upstream`. Must be
    /// called within a Tokio runtime.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let address = listener.local_addr()?;
        let shared = Arc::new(Shared {
            refusing: AtomicBool::new(false),
            connections: Mutex::new(Vec::new()),
        });
        let accept = tokio::spawn(accept_loop(listener, upstream, shared.clone()));
        Ok(Proxy {
            address,
            shared,
            accept,
        })
    }

    pub fn address(&self) -> String {
        self.address.to_string()
    }

    /// Closes every forwarded connection and refuses (accepts and closes at once) new ones
    /// until [`Proxy::resume`].
    pub fn cut(&self) {
        self.shared.refusing.store(true, Ordering::SeqCst);
        for connection in self.shared.connections.lock().unwrap().drain(..) {
            connection.abort();
        }
    }

    pub fn resume(&self) {
        self.shared.refusing.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

async fn accept_loop(listener: TcpListener, upstream: SocketAddr, shared: Arc<Shared>) {
    while let Ok((mut client, _)) = listener.accept().await {
        if shared.refusing.load(Ordering::SeqCst) {
            drop(client);
            continue;
        }
        let task = tokio::spawn(async move {
            if let Ok(mut server) = TcpStream::connect(upstream).await {
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            }
        });
        let mut connections = shared.connections.lock().unwrap();
        connections.retain(|c| !c.is_finished());
        connections.push(task.abort_handle());
    }
}
