//! A real HTTPS server on 127.0.0.1 for the HTTP capability's tests: a throwaway CA (rcgen)
//! issues its certificate, and a minimal HTTP/1.1 responder written on raw TLS streams gives the
//! tests full control of what goes on the wire (lying or missing Content-Length, slow bodies,
//! redirects), which a well-behaved server library would not send.

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
    /// Requests served so far.
    pub hits: Arc<AtomicUsize>,
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
    let counter = hits.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let counter = counter.clone();
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(tcp).await {
                    counter.fetch_add(1, Ordering::SeqCst);
                    // Each test request ends the connection; errors just drop it.
                    let _ = tokio::time::timeout(Duration::from_secs(20), serve(tls)).await;
                }
            });
        }
    });
    TestServer {
        addr,
        ca_file,
        hits,
        task,
    }
}

/// One request on `stream`, answered by path.
async fn serve<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut stream: S,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 64 * 1024 {
            return Ok(());
        }
    };
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
    match path {
        "/echo" => {
            let json = serde_json::json!({
                "method": method,
                "target": target,
                "headers": headers.iter().map(|(n, v)| serde_json::json!([n, v])).collect::<Vec<_>>(),
                "body": String::from_utf8_lossy(&body),
            })
            .to_string();
            respond(&mut stream, "200 OK", "application/json", json.as_bytes()).await
        }
        "/page" => {
            let html = "<html><head><title>Fish</title></head><body><article><h1>Chitin</h1>\
                        <p>Chitin is a long-chain polymer that forms the exoskeletons of \
                        arthropods such as crustaceans and insects, and the cell walls of \
                        fungi.</p><p>It is one of the most abundant natural polysaccharides, \
                        second only to cellulose, and is studied for its uses in medicine \
                        and industry.</p></article></body></html>";
            respond(
                &mut stream,
                "200 OK",
                "text/html; charset=utf-8",
                html.as_bytes(),
            )
            .await
        }
        "/redirect" => {
            let head = "HTTP/1.1 302 Found\r\nlocation: https://169.254.169.254/latest/meta-data\r\n\
                        content-length: 0\r\nconnection: close\r\n\r\n";
            stream.write_all(head.as_bytes()).await?;
            stream.shutdown().await
        }
        "/big" => {
            // 6 MiB, honestly declared.
            let n = 6 * 1024 * 1024;
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {n}\r\nconnection: close\r\n\r\n"
            );
            stream.write_all(head.as_bytes()).await?;
            stream_bytes(&mut stream, n).await
        }
        "/lying" => {
            // Declares 1000 bytes, then keeps sending: the client must stop reading at its cap.
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\
                        x-declared-length: 1000\r\nconnection: close\r\n\r\n";
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
            stream.shutdown().await
        }
        "/unsized" => {
            // No Content-Length, no chunking: the body ends when the connection closes.
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n";
            stream.write_all(head.as_bytes()).await?;
            stream_bytes(&mut stream, 6 * 1024 * 1024).await
        }
        "/slow" => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 100\r\n\
                        connection: close\r\n\r\nfirst";
            stream.write_all(head.as_bytes()).await?;
            stream.flush().await?;
            tokio::time::sleep(Duration::from_secs(15)).await;
            Ok(())
        }
        _ => respond(&mut stream, "404 Not Found", "text/plain", b"no such path").await,
    }
}

async fn respond<S: tokio::io::AsyncWrite + Unpin>(
    stream: &mut S,
    status: &str,
    content_type: &str,
    body: &[u8],
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    stream.shutdown().await
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
    stream.shutdown().await
}
