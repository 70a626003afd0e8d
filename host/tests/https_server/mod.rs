//! A real HTTPS server on 127.0.0.1 for the HTTP capability's tests: a throwaway CA (rcgen)
//! issues its certificate, and a minimal HTTP/1.1 responder written on raw TLS streams gives the
//! tests full control of what goes on the wire (lying or missing Content-Length, slow bodies,
//! redirects, connections closed early), which a well-behaved server library would not send.
//! Connections are kept alive between requests unless a path says otherwise; the server counts
//! both the requests it reads and the connections it accepts.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A running server; it stops when dropped.
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The PEM file of the CA that signed its certificate.
    pub ca_file: PathBuf,
    /// Requests received so far (counted once the request head is read).
    pub hits: Arc<AtomicUsize>,
    /// TLS connections accepted so far.
    pub connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestServer {
    /// `https://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }
}

/// Start a server whose CA certificate is written into `dir`.
pub async fn start(dir: &Path) -> TestServer {
    let ca_key = rcgen::KeyPair::generate().expect("CA key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "chitin test CA");
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA cert");
    let issuer = rcgen::Issuer::new(ca_params, ca_key);

    let leaf_key = rcgen::KeyPair::generate().expect("leaf key");
    let leaf_params =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("leaf params");
    let leaf = leaf_params
        .signed_by(&leaf_key, &issuer)
        .expect("leaf cert");

    let ca_file = dir.join("test-ca.pem");
    std::fs::write(&ca_file, ca_cert.pem()).expect("write CA");

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
        )
        .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let hits = Arc::new(AtomicUsize::new(0));
    let connections = Arc::new(AtomicUsize::new(0));
    let (requests, accepted) = (hits.clone(), connections.clone());
    let task = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            // Responses leave in one write, but a kept-alive connection must never wait on
            // Nagle and a delayed ACK.
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            let (requests, accepted) = (requests.clone(), accepted.clone());
            tokio::spawn(async move {
                if let Ok(mut tls) = acceptor.accept(tcp).await {
                    accepted.fetch_add(1, Ordering::SeqCst);
                    // Requests until a response closes the connection, the client goes, or it
                    // stays idle too long; errors just drop it.
                    let mut idle = KEEP_ALIVE;
                    while let Ok(Ok(Next::KeepAlive(next))) =
                        tokio::time::timeout(idle, serve(&mut tls, &requests)).await
                    {
                        idle = next;
                    }
                }
            });
        }
    });
    TestServer {
        addr,
        ca_file,
        hits,
        connections,
        task,
    }
}

/// How long the server keeps an idle connection open, unless a path says otherwise. Longer than
/// any test waits between two calls.
const KEEP_ALIVE: Duration = Duration::from_secs(20);

/// What happens to a connection after a response.
enum Next {
    /// Wait this long for the next request.
    KeepAlive(Duration),
    /// Close it.
    Close,
}

/// One request on `stream`, answered by path.
async fn serve<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    stream: &mut S,
    requests: &AtomicUsize,
) -> std::io::Result<Next> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(Next::Close);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 64 * 1024 {
            return Ok(Next::Close);
        }
    };
    requests.fetch_add(1, Ordering::SeqCst);
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default().to_owned();
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    let path = target.split('?').next().unwrap_or_default();
    // `/closing` is `/echo` from a server that closes every connection after one response.
    let close = path == "/closing"
        || headers
            .iter()
            .any(|(n, v)| n == "connection" && v.eq_ignore_ascii_case("close"));
    let kept = if close {
        Next::Close
    } else {
        Next::KeepAlive(KEEP_ALIVE)
    };
    match path {
        "/echo" | "/brief" | "/closing" => {
            let json = serde_json::json!({
                "method": method,
                "target": target,
                "headers": headers.iter().map(|(n, v)| serde_json::json!([n, v])).collect::<Vec<_>>(),
                "body": String::from_utf8_lossy(&body),
            })
            .to_string();
            respond(stream, "200 OK", "application/json", json.as_bytes(), close).await?;
            // `/brief`: a server that closes a connection idle for more than 100 ms.
            Ok(match (path, kept) {
                ("/brief", Next::KeepAlive(_)) => Next::KeepAlive(Duration::from_millis(100)),
                (_, next) => next,
            })
        }
        "/drop" => {
            // Read the request, then close the connection without a response.
            stream.shutdown().await?;
            Ok(Next::Close)
        }
        "/page" => {
            let html = "<html><head><title>Fish</title></head><body><article><h1>Chitin</h1>\
                        <p>Chitin is a long-chain polymer that forms the exoskeletons of \
                        arthropods such as crustaceans and insects, and the cell walls of \
                        fungi.</p><p>It is one of the most abundant natural polysaccharides, \
                        second only to cellulose, and is studied for its uses in medicine \
                        and industry.</p></article></body></html>";
            respond(
                stream,
                "200 OK",
                "text/html; charset=utf-8",
                html.as_bytes(),
                close,
            )
            .await?;
            Ok(kept)
        }
        "/redirect" => {
            let head = "HTTP/1.1 302 Found\r\nlocation: https://169.254.169.254/latest/meta-data\r\n\
                        content-length: 0\r\nconnection: close\r\n\r\n";
            stream.write_all(head.as_bytes()).await?;
            stream.shutdown().await?;
            Ok(Next::Close)
        }
        "/big" => {
            // 6 MiB, honestly declared, on a connection the server would keep.
            let n = 6 * 1024 * 1024;
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {n}\r\n\r\n"
            );
            stream.write_all(head.as_bytes()).await?;
            stream_bytes(stream, n).await?;
            Ok(kept)
        }
        "/declared" => {
            // A HEAD answer declaring 50 MiB: its body, which HEAD never has, would be that long.
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 52428800\r\n\
                        \r\n";
            stream.write_all(head.as_bytes()).await?;
            Ok(kept)
        }
        "/lying" => {
            // Declares 1000 bytes, then keeps sending: the client must stop reading at its cap.
            // The server would keep the connection for another request.
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\
                        x-declared-length: 1000\r\n\r\n";
            stream.write_all(head.as_bytes()).await?;
            let block = vec![b'a'; 64 * 1024];
            for _ in 0..(6 * 16) {
                stream
                    .write_all(format!("{:x}\r\n", block.len()).as_bytes())
                    .await?;
                stream.write_all(&block).await?;
                stream.write_all(b"\r\n").await?;
            }
            stream.write_all(b"0\r\n\r\n").await?;
            Ok(kept)
        }
        "/unsized" => {
            // No Content-Length, no chunking: the body ends when the connection closes.
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n";
            stream.write_all(head.as_bytes()).await?;
            stream_bytes(stream, 6 * 1024 * 1024).await?;
            stream.shutdown().await?;
            Ok(Next::Close)
        }
        "/drip" => {
            // 100 declared bytes, one every 200 ms: never silent long enough for a timeout
            // between two bytes.
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 100\r\n\r\n";
            stream.write_all(head.as_bytes()).await?;
            for _ in 0..100 {
                stream.write_all(b"d").await?;
                stream.flush().await?;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Ok(Next::Close)
        }
        "/slow" => {
            // 5 of 100 declared bytes, then 15 s of silence, on a connection the server keeps.
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 100\r\n\
                        \r\nfirst";
            stream.write_all(head.as_bytes()).await?;
            stream.flush().await?;
            tokio::time::sleep(Duration::from_secs(15)).await;
            Ok(Next::Close)
        }
        _ => {
            respond(
                stream,
                "404 Not Found",
                "text/plain",
                b"no such path",
                close,
            )
            .await?;
            Ok(kept)
        }
    }
}

/// A response with a Content-Length; `close` says the connection ends after it.
async fn respond<S: tokio::io::AsyncWrite + Unpin>(
    stream: &mut S,
    status: &str,
    content_type: &str,
    body: &[u8],
    close: bool,
) -> std::io::Result<()> {
    let connection = if close { "connection: close\r\n" } else { "" };
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n{connection}\r\n",
        body.len()
    );
    let mut message = head.into_bytes();
    message.extend_from_slice(body);
    stream.write_all(&message).await?;
    stream.flush().await?;
    if close {
        stream.shutdown().await?;
    }
    Ok(())
}

async fn stream_bytes<S: tokio::io::AsyncWrite + Unpin>(
    stream: &mut S,
    n: usize,
) -> std::io::Result<()> {
    let block = vec![b'a'; 64 * 1024];
    let mut left = n;
    while left > 0 {
        let k = left.min(block.len());
        stream.write_all(&block[..k]).await?;
        left -= k;
    }
    stream.flush().await
}
