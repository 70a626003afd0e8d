//! The TLS client configuration for outbound HTTPS: the Mozilla root set (webpki-roots) plus any
//! CA certificates the operator's policy names (`[http] ca_files`, e.g. a lab or test CA).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// A CA file named by the policy cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The file cannot be read or holds no valid PEM certificate.
    #[error("CA file {path}: {reason}")]
    CaFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// A client configuration trusting the public roots and the certificates in `ca_files`.
pub fn client_config(ca_files: &[PathBuf]) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.into(),
    };
    for path in ca_files {
        for cert in read_certs(path)? {
            roots.add(cert).map_err(|e| TlsError::CaFile {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let err = |reason: String| TlsError::CaFile {
        path: path.to_owned(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| err(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(e.to_string()))?;
    if certs.is_empty() {
        return Err(err("no PEM certificate in the file".into()));
    }
    Ok(certs)
}
