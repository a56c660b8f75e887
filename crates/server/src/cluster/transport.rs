//! How a server reaches its peers and takes their connections: plain TCP, TLS
//! (`tls::quorum`), or both on the quorum port during a rolling switch, told apart by the
//! first byte (ZooKeeper's `sslQuorum` and `portUnification`).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpStream;

use crate::tls::quorum::{PeerRead, PeerTls, PeerWrite};
use crate::tls::{QuorumTls, TlsError};

#[derive(Debug, Default)]
pub struct Transport {
    /// None: plain TCP only.
    tls: Option<Arc<PeerTls>>,
    /// Whether this server dials its peers over TLS.
    dial_tls: bool,
    /// Whether the quorum port takes plain peers too while `dial_tls`, or TLS peers too while
    /// not.
    either: bool,
}

impl Transport {
    /// Reads the key material `settings` names; any failure stops the start.
    pub fn new(settings: &QuorumTls) -> Result<Transport, TlsError> {
        if !settings.in_use() {
            return Ok(Transport::default());
        }
        Ok(Transport {
            tls: Some(Arc::new(PeerTls::new(settings)?)),
            dial_tls: settings.enabled,
            either: settings.port_unification,
        })
    }

    /// What reads the store files again when they change, if TLS is on.
    pub fn tls(&self) -> Option<Arc<PeerTls>> {
        self.tls.clone()
    }

    /// A connection to the peer at `addr` (`host:port`), over TLS if this server dials so.
    pub async fn connect(&self, addr: &str) -> io::Result<(PeerRead, PeerWrite)> {
        let stream = TcpStream::connect(addr).await?;
        let _ = stream.set_nodelay(true);
        match &self.tls {
            Some(tls) if self.dial_tls => {
                let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
                tls.dial(stream, host.trim_start_matches('[').trim_end_matches(']'))
                    .await
            }
            _ => Ok(plain(stream)),
        }
    }

    /// A peer's connection on the quorum port, once it is TLS or plain as this server takes
    /// them; why not, for the log.
    pub async fn accept(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
    ) -> Result<(PeerRead, PeerWrite), String> {
        let _ = stream.set_nodelay(true);
        let Some(tls) = &self.tls else {
            return Ok(plain(stream));
        };
        let secure = if self.either {
            crate::tls::opens_with_tls(&stream, tls.handshake_timeout())
                .await
                .map_err(|e| format!("{peer}: {e}"))?
        } else {
            true
        };
        if !secure {
            return Ok(plain(stream));
        }
        tls.accept(stream)
            .await
            .map_err(|e| format!("{peer}: TLS handshake failed: {e}"))
    }
}

fn plain(stream: TcpStream) -> (PeerRead, PeerWrite) {
    let (read, write) = stream.into_split();
    (Box::new(read), Box::new(write))
}
