//! The certificates a test environment needs, made fresh for each: one CA that signs the API
//! servers' serving certificates and the client certificates (the admin in `system:masters`,
//! the controller manager and scheduler under their bootstrap identities), and the key pair
//! that signs service-account tokens.

use std::net::{IpAddr, Ipv4Addr};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

use crate::Error;

fn pki(e: impl std::fmt::Display) -> Error {
    Error::Pki(e.to_string())
}

/// A certificate and its private key, PEM.
#[derive(Clone, Debug)]
pub struct Pair {
    /// The certificate (or, for the token key, the public key).
    pub cert_pem: String,
    /// The private key (PKCS#8).
    pub key_pem: String,
}

/// A CA and the service-account token key.
pub struct Pki {
    ca_params: CertificateParams,
    ca_key: KeyPair,
    /// The CA's certificate, PEM.
    pub ca_pem: String,
    /// The service-account token signing key (`key_pem`) and its public key (`cert_pem`).
    pub service_accounts: Pair,
}

impl Pki {
    /// A fresh CA (ECDSA P-256) and token key.
    pub fn generate() -> Result<Self, Error> {
        let ca_key = KeyPair::generate().map_err(pki)?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(pki)?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "tephra-envtest-ca");
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_pem = ca_params.self_signed(&ca_key).map_err(pki)?.pem();
        let sa = KeyPair::generate().map_err(pki)?;
        Ok(Self {
            ca_params,
            ca_key,
            ca_pem,
            service_accounts: Pair {
                cert_pem: sa.public_key_pem(),
                key_pem: sa.serialize_pem(),
            },
        })
    }

    fn sign(&self, params: CertificateParams) -> Result<Pair, Error> {
        let key = KeyPair::generate().map_err(pki)?;
        let issuer = Issuer::new(self.ca_params.clone(), &self.ca_key);
        let cert = params.signed_by(&key, &issuer).map_err(pki)?;
        Ok(Pair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// A serving certificate for loopback and the in-cluster names of the `kubernetes`
    /// Service.
    pub fn serving(&self, cn: &str) -> Result<Pair, Error> {
        self.serving_for(cn, &[])
    }

    /// [`Pki::serving`], valid for `names` too (the `<service>.<namespace>.svc` name an API
    /// server checks when it proxies to an aggregated API server, say).
    pub fn serving_for(&self, cn: &str, names: &[&str]) -> Result<Pair, Error> {
        let mut sans = vec![
            "localhost".to_string(),
            "kubernetes".to_string(),
            "kubernetes.default".to_string(),
            "kubernetes.default.svc".to_string(),
            "kubernetes.default.svc.cluster.local".to_string(),
        ];
        sans.extend(names.iter().map(|n| n.to_string()));
        let mut params = CertificateParams::new(sans).map_err(pki)?;
        params
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        params.is_ca = IsCa::ExplicitNoCa;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.distinguished_name.push(DnType::CommonName, cn);
        self.sign(params)
    }

    /// A client certificate: the API server reads `cn` as the user and `group` (`O=`) as its
    /// group.
    pub fn client(&self, cn: &str, group: Option<&str>) -> Result<Pair, Error> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(pki)?;
        params.is_ca = IsCa::ExplicitNoCa;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.distinguished_name.push(DnType::CommonName, cn);
        if let Some(g) = group {
            params.distinguished_name.push(DnType::OrganizationName, g);
        }
        self.sign(params)
    }
}
