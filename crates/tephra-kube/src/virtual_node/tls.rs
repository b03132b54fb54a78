//! The virtual kubelet's TLS: the serving certificate (given, or made at start for the
//! address the Node announces, as a kubelet without `--tls-cert-file` makes its own), and the
//! client certificate every request must present (the API server's
//! `--kubelet-client-certificate`): chained to the client CA and with a common name on the
//! allowed list. The common name is read from the certificate's subject with a small DER
//! reader (the few tags a certificate's subject is made of).

use std::net::IpAddr;
use std::sync::Arc;

use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyPair, SanType};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio_rustls::TlsAcceptor;

use super::VirtualNodeError;

/// The serving certificate chain and key.
pub struct Serving {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl Serving {
    /// Reads a PEM certificate chain and key.
    pub fn from_pem(cert: &[u8], key: &[u8]) -> Result<Self, VirtualNodeError> {
        let chain = CertificateDer::pem_slice_iter(cert)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| VirtualNodeError::Tls(format!("serving certificate: {e}")))?;
        if chain.is_empty() {
            return Err(VirtualNodeError::Tls(
                "serving certificate: no CERTIFICATE block".into(),
            ));
        }
        let key = PrivateKeyDer::from_pem_slice(key)
            .map_err(|e| VirtualNodeError::Tls(format!("serving key: {e}")))?;
        Ok(Self { chain, key })
    }

    /// A self-signed certificate for `address` (an IP or a host name).
    pub fn self_signed(address: &str) -> Result<Self, VirtualNodeError> {
        let tls = |e: rcgen::Error| VirtualNodeError::Tls(format!("serving certificate: {e}"));
        let key = KeyPair::generate().map_err(tls)?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(tls)?;
        params
            .subject_alt_names
            .push(match address.parse::<IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName(address.to_string().try_into().map_err(tls)?),
            });
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.distinguished_name.push(
            DnType::CommonName,
            format!("tephra-virtual-kubelet@{address}"),
        );
        let cert = params.self_signed(&key).map_err(tls)?;
        Ok(Self {
            chain: vec![cert.der().clone()],
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        })
    }
}

/// The certificates (DER) of a PEM bundle.
pub fn certificates(pem: &[u8]) -> Result<Vec<Vec<u8>>, VirtualNodeError> {
    CertificateDer::pem_slice_iter(pem)
        .map(|c| c.map(|c| c.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| VirtualNodeError::Tls(format!("client CA: {e}")))
}

/// A TLS acceptor that serves `serving` and requires a client certificate chained to one of
/// `client_ca` (DER).
pub fn acceptor(serving: Serving, client_ca: &[Vec<u8>]) -> Result<TlsAcceptor, VirtualNodeError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for der in client_ca {
        roots
            .add(CertificateDer::from(der.clone()))
            .map_err(|e| VirtualNodeError::Tls(format!("client CA: {e}")))?;
    }
    if roots.is_empty() {
        return Err(VirtualNodeError::Tls(
            "client CA: none given, and the control plane's kubeconfig names none".into(),
        ));
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| VirtualNodeError::Tls(format!("client CA: {e}")))?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| VirtualNodeError::Tls(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(serving.chain, serving.key)
        .map_err(|e| VirtualNodeError::Tls(format!("serving certificate: {e}")))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// One DER element: its tag, its contents and what follows it.
fn element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
/// 2.5.4.3, the common name.
const COMMON_NAME: [u8; 3] = [0x55, 0x04, 0x03];

/// The common name of a certificate's subject.
pub fn common_name(cert: &[u8]) -> Option<String> {
    let (tag, certificate, _) = element(cert)?;
    (tag == SEQUENCE).then_some(())?;
    let (tag, tbs, _) = element(certificate)?;
    (tag == SEQUENCE).then_some(())?;
    let mut rest = tbs;
    // [0] version, when present.
    if rest.first() == Some(&0xa0) {
        rest = element(rest)?.2;
    }
    // serial, signature algorithm, issuer, validity; then the subject.
    for _ in 0..4 {
        rest = element(rest)?.2;
    }
    let (tag, mut rdns, _) = element(rest)?;
    (tag == SEQUENCE).then_some(())?;
    let mut found = None;
    while !rdns.is_empty() {
        let (tag, set, next) = element(rdns)?;
        rdns = next;
        (tag == SET).then_some(())?;
        let mut attrs = set;
        while !attrs.is_empty() {
            let (tag, attr, next) = element(attrs)?;
            attrs = next;
            (tag == SEQUENCE).then_some(())?;
            let (tag, oid, value) = element(attr)?;
            if tag == OID && oid == COMMON_NAME {
                let (_, text, _) = element(value)?;
                found = Some(String::from_utf8_lossy(text).into_owned());
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert_named(cn: &str, org: Option<&str>) -> Vec<u8> {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["x.example".to_string()]).unwrap();
        if let Some(o) = org {
            params.distinguished_name.push(DnType::OrganizationName, o);
        }
        params.distinguished_name.push(DnType::CommonName, cn);
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn the_subjects_common_name_is_read_and_not_the_issuers() {
        assert_eq!(
            common_name(&cert_named(
                "kube-apiserver-kubelet-client",
                Some("kubeadm:cluster-admins")
            ))
            .as_deref(),
            Some("kube-apiserver-kubelet-client")
        );
        // A long name takes a long-form length.
        let long = "n".repeat(200);
        assert_eq!(common_name(&cert_named(&long, None)), Some(long));
    }

    #[test]
    fn malformed_certificates_have_no_common_name() {
        let der = cert_named("a", None);
        for cut in [0, 1, 2, 10, der.len() / 2] {
            assert_eq!(common_name(&der[..cut]), None, "cut at {cut}");
        }
        assert_eq!(common_name(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
    }

    #[test]
    fn a_self_signed_serving_certificate_names_its_address() {
        for address in ["127.0.0.1", "tephra.volcano-system.svc"] {
            let s = Serving::self_signed(address).unwrap();
            assert_eq!(
                common_name(&s.chain[0]).as_deref(),
                Some(format!("tephra-virtual-kubelet@{address}").as_str())
            );
        }
    }

    #[test]
    fn an_acceptor_needs_a_client_ca() {
        let s = Serving::self_signed("127.0.0.1").unwrap();
        let err = acceptor(s, &[]).err().unwrap().to_string();
        assert!(err.contains("client CA"), "{err}");
    }
}
