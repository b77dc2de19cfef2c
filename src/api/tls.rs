//! TLS on the listener (rustls with the ring provider): the acceptor built from the config's
//! PEM files, refused with what is wrong before the node serves anyone (`opledger check`
//! builds it too). Clients then speak HTTP/1.1 over TLS 1.2 or 1.3.

use crate::config::TlsFiles;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;

/// Why TLS cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate file does not hold a PEM certificate chain.
    #[error(
        "[tls] cert = {path}: {reason}; give a PEM file with the certificate chain, leaf first"
    )]
    Cert {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The key file does not hold a PEM private key.
    #[error(
        "[tls] key = {path}: {reason}; give a PEM file with the private key (PKCS#8, PKCS#1 or SEC1)"
    )]
    Key {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The key does not fit the certificate, or rustls refused them otherwise.
    #[error("[tls] the key and certificate do not go together: {0}")]
    Mismatch(String),
}

/// The acceptor for `files`.
pub fn acceptor(files: &TlsFiles) -> Result<TlsAcceptor, TlsError> {
    let cert_path = files.cert.display().to_string();
    let certs = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| TlsError::Cert {
            path: cert_path.clone(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Cert {
            path: cert_path,
            reason: "no certificate in it".into(),
        });
    }
    // Never the key's bytes in a message: only where it is and what is wrong.
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| TlsError::Key {
        path: files.key.display().to_string(),
        reason: e.to_string(),
    })?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Mismatch(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| TlsError::Mismatch(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
