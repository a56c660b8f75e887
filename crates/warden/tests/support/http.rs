//! A minimal HTTP/1.1 client for the admin server: one GET or POST per connection
//! (`Connection: close`), read to the end; a POST may carry a body, a reply may be bytes. Enough to check status, headers and body byte for
//! byte, with nothing between the test and the server's bytes.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// `GET path`, with `headers` ("Name: value" lines).
pub fn get(addr: SocketAddr, path: &str, headers: &[&str]) -> std::io::Result<Reply> {
    request(addr, "GET", path, headers)
}

pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[&str],
) -> std::io::Result<Reply> {
    request_with_body(addr, method, path, headers, b"")
}

/// A request with `body` (a POST says its length even when it is empty).
pub fn request_with_body(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &[u8],
) -> std::io::Result<Reply> {
    let (status, headers, body) = exchange(addr, method, path, headers, body)?;
    text_reply(status, headers, body)
}

/// A client's TLS: trusts the CA certificates in `ca_pem`, shows `identity` (its certificate
/// chain and key, PEM files) when asked if it has one, offers only `versions`.
pub fn tls_client(
    ca_pem: &Path,
    identity: Option<(PathBuf, PathBuf)>,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Arc<rustls::ClientConfig> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca_pem).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_protocol_versions(versions)
        .with_root_certificates(roots);
    Arc::new(match identity {
        None => builder.with_no_client_auth(),
        Some((chain, key)) => {
            let chain = CertificateDer::pem_file_iter(chain)
                .unwrap()
                .map(|c| c.unwrap())
                .collect();
            let key = PrivateKeyDer::from_pem_file(key).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
    })
}

/// `GET path` over TLS as `config` says, the server named by `addr`'s IP address. An error
/// when the handshake fails.
pub fn get_tls(
    config: Arc<rustls::ClientConfig>,
    addr: SocketAddr,
    path: &str,
) -> std::io::Result<Reply> {
    let name = ServerName::IpAddress(addr.ip().into());
    let connection = rustls::ClientConnection::new(config, name).unwrap();
    let socket = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    socket.set_read_timeout(Some(Duration::from_secs(10)))?;
    request_over(
        rustls::StreamOwned::new(connection, socket),
        addr,
        "GET",
        path,
        &[],
    )
}

/// A plain HTTP `GET path` sent to a port that expects TLS: the bytes it answers, read until
/// it closes (an HTTP server would answer `HTTP/1.1 ...`).
pub fn plain_to_tls_port(addr: SocketAddr, path: &str) -> Vec<u8> {
    let mut plain = TcpStream::connect(addr).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    plain
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .unwrap();
    let mut answer = Vec::new();
    let _ = plain.read_to_end(&mut answer);
    answer
}

/// [`request`] over a connection already made (a TLS one, say) to `addr`.
pub fn request_over(
    s: impl Read + Write,
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[&str],
) -> std::io::Result<Reply> {
    let (status, headers, body) = exchange_over(s, addr, method, path, headers, &[])?;
    text_reply(status, headers, body)
}

fn text_reply(
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
) -> std::io::Result<Reply> {
    let body = String::from_utf8(body).expect("an admin reply is UTF-8");
    Ok(Reply {
        status,
        headers,
        body,
    })
}

/// A reply whose body may be any bytes (a snapshot).
#[derive(Debug)]
pub struct BinaryReply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl BinaryReply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (a JSON answer).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// `method path` with `body` (sent with its Content-Length), the reply's body as bytes.
pub fn binary(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &[u8],
) -> std::io::Result<BinaryReply> {
    let (status, headers, body) = exchange(addr, method, path, headers, body)?;
    Ok(BinaryReply {
        status,
        headers,
        body,
    })
}

type Exchanged = (u16, Vec<(String, String)>, Vec<u8>);

fn exchange(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &[u8],
) -> std::io::Result<Exchanged> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    exchange_over(s, addr, method, path, headers, body)
}

fn exchange_over(
    mut s: impl Read + Write,
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &[u8],
) -> std::io::Result<Exchanged> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for h in headers {
        head.push_str(h);
        head.push_str("\r\n");
    }
    if method == "POST" || !body.is_empty() {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    // A server that refuses a body too large answers and closes before reading all of it:
    // its answer is still there to read.
    let sent = s.write_all(body);
    let mut raw = Vec::new();
    if let Err(e) = s.read_to_end(&mut raw)
        && raw.is_empty()
    {
        return Err(sent.err().unwrap_or(e));
    }
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head and a body");
    let head = String::from_utf8(raw[..split].to_vec()).expect("an HTTP head is text");
    let body = raw[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Ok((status, headers, body))
}
