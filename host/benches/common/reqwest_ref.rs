//! The HTTPS reference the http rows are measured against: reqwest from the host, trusting the
//! bench server's CA, on a new connection per request or with its own pool.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;

/// A TLS client configuration trusting only the CA in `ca_file`.
pub fn tls(ca_file: &Path) -> rustls::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(ca_file).expect("ca") {
        roots.add(cert.expect("cert")).expect("root");
    }
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// A reqwest client over `tls`: keeping no idle connection, or with its default pool.
pub fn client(tls: &rustls::ClientConfig, pooled: bool) -> reqwest::Client {
    let builder = reqwest::Client::builder().tls_backend_preconfigured(tls.clone());
    let builder = if pooled {
        builder
    } else {
        builder.pool_max_idle_per_host(0)
    };
    builder.build().expect("client")
}

/// One GET of `url`, its body read whole.
pub async fn get(client: &reqwest::Client, url: &str) {
    let body = client
        .get(url)
        .send()
        .await
        .expect("reqwest GET")
        .bytes()
        .await
        .expect("body");
    assert!(!body.is_empty());
}
