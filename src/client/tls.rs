//! The one TLS policy of a client: how certificates are checked (`verify=`), built once into a
//! rustls configuration that both transports use, so a direct connection and one through a
//! proxy trust exactly the same servers.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig as RustlsConfig, DigitallySignedStruct, SignatureScheme};

use super::config::Verify;
use crate::error::{Error, Result};

/// ALPN for the HTTP/1.1 transport: it speaks HTTP/1.1 only.
pub(crate) const ALPN_HTTP1: &[&[u8]] = &[b"http/1.1"];
/// ALPN for the HTTP/2 transport (reqwest, when forced): it speaks HTTP/2 only.
pub(crate) const ALPN_H2: &[&[u8]] = &[b"h2"];

/// The rustls configuration for `verify`, offering the `alpn` protocols.
pub(crate) fn config(verify: &Verify, alpn: &[&[u8]]) -> Result<RustlsConfig> {
    let provider = provider();
    let builder = with_versions(&provider)?;
    let mut config = match verify {
        Verify::Default => {
            let verifier = rustls_platform_verifier::Verifier::new(provider).map_err(|e| {
                Error::Configuration(format!("cannot load the system's trust store: {e}"))
            })?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
                .with_no_client_auth()
        }
        Verify::Disabled => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
            .with_no_client_auth(),
        Verify::CaBundle(path) => {
            let pem = std::fs::read(path).map_err(|e| {
                Error::Configuration(format!("verify: cannot read {}: {e}", path.display()))
            })?;
            let mut roots = rustls::RootCertStore::empty();
            for certificate in CertificateDer::pem_slice_iter(&pem) {
                let certificate = certificate.map_err(|e| {
                    Error::Configuration(format!(
                        "verify: {} is not a PEM bundle: {e}",
                        path.display()
                    ))
                })?;
                roots.add(certificate).map_err(|e| {
                    Error::Configuration(format!(
                        "verify: {} holds a certificate rustls refuses: {e}",
                        path.display()
                    ))
                })?;
            }
            if roots.is_empty() {
                return Err(Error::Configuration(format!(
                    "verify: {} holds no certificate",
                    path.display()
                )));
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

/// A configuration for a client that never speaks TLS (the HTTP/2 transport to a plain
/// `http://` service, which goes through no proxy): it trusts nothing. Given to reqwest so it
/// does not load the system's trust store each time it builds a client (reading files, and
/// logging what it cannot parse, on a tokio worker).
pub(crate) fn never_used() -> Result<RustlsConfig> {
    let mut config = with_versions(&provider())?
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    config.alpn_protocols = ALPN_H2.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

/// A configuration's start: `provider`, with rustls's safe default protocol versions.
fn with_versions(
    provider: &Arc<CryptoProvider>,
) -> Result<rustls::ConfigBuilder<RustlsConfig, rustls::WantsVerifier>> {
    RustlsConfig::builder_with_provider(Arc::clone(provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Configuration(format!("TLS setup failed: {e}")))
}

/// The process default if the application installed one, else aws-lc-rs (what reqwest uses).
fn provider() -> Arc<CryptoProvider> {
    CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
}

/// `verify=False`: any certificate is accepted (tests against self-signed servers only). The
/// handshake's signatures are still checked, so the connection is at least encrypted to
/// whoever holds the key the server presented.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
