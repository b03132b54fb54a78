//! Certificates for serving TLS on loopback: a throw-away CA and a leaf signed by it
//! (`CA:FALSE`, SAN `127.0.0.1` and `localhost`, serverAuth). TLS is what makes bearer tokens
//! work with `kubectl`, which never sends a token over plain HTTP; rustls (kube-rs) refuses a
//! self-signed CA used directly as a server certificate, hence the separate leaf. The same CA
//! signs the client certificate the servers present to a kubelet served elsewhere (a virtual
//! kubelet's Node), as kubeadm's `apiserver-kubelet-client`.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::TlsAcceptor;

use crate::error::Error;

/// A CA and a server certificate for loopback.
pub struct Certs {
    /// The CA certificate, PEM (for `certificate-authority-data`).
    pub ca_pem: String,
    leaf: CertificateDer<'static>,
    ca: CertificateDer<'static>,
    key: Vec<u8>,
    /// The client certificate the servers present to a kubelet served elsewhere (kubeadm's
    /// `apiserver-kubelet-client`), and its key.
    kubelet_client: (CertificateDer<'static>, Vec<u8>),
}

fn tls(e: impl std::fmt::Display) -> Error {
    Error::Tls(e.to_string())
}

impl Certs {
    /// Generates a fresh CA and leaf.
    pub fn generate() -> Result<Self, Error> {
        let ca_key = KeyPair::generate().map_err(tls)?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(tls)?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "tephra-devcluster-ca");
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params.self_signed(&ca_key).map_err(tls)?;
        let leaf_key = KeyPair::generate().map_err(tls)?;
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).map_err(tls)?;
        params
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        params.is_ca = IsCa::ExplicitNoCa;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params
            .distinguished_name
            .push(DnType::CommonName, "tephra-devcluster");
        let issuer = Issuer::new(ca_params, &ca_key);
        let leaf = params.signed_by(&leaf_key, &issuer).map_err(tls)?;
        let client_key = KeyPair::generate().map_err(tls)?;
        let mut client = CertificateParams::new(Vec::<String>::new()).map_err(tls)?;
        client.is_ca = IsCa::ExplicitNoCa;
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        client.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        client
            .distinguished_name
            .push(DnType::OrganizationName, "kubeadm:cluster-admins");
        client
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver-kubelet-client");
        let client = client.signed_by(&client_key, &issuer).map_err(tls)?;
        Ok(Self {
            ca_pem: ca_cert.pem(),
            leaf: leaf.der().clone(),
            ca: ca_cert.der().clone(),
            key: leaf_key.serialize_der(),
            kubelet_client: (client.der().clone(), client_key.serialize_der()),
        })
    }

    /// The CA certificate, DER.
    pub fn ca_der(&self) -> Vec<u8> {
        self.ca.to_vec()
    }

    /// How a server reaches a kubelet served elsewhere: presenting the kubelet client
    /// certificate, and verifying no server certificate (kube-apiserver without
    /// `--kubelet-certificate-authority` does not either).
    pub fn kubelet_client(&self) -> Result<Arc<rustls::ClientConfig>, Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.kubelet_client.1.clone()));
        let config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(tls)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServer(provider)))
            .with_client_auth_cert(vec![self.kubelet_client.0.clone(), self.ca.clone()], key)
            .map_err(tls)?;
        Ok(Arc::new(config))
    }

    /// A TLS acceptor serving the leaf (HTTP/1.1 only).
    pub fn acceptor(&self) -> Result<TlsAcceptor, Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.clone()));
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(tls)?
            .with_no_client_auth()
            .with_single_cert(vec![self.leaf.clone(), self.ca.clone()], key)
            .map_err(tls)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

/// Accepts any server certificate whose handshake signature holds.
#[derive(Debug)]
struct AnyServer(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
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
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
