//! The key pair of the `ssh` job plugin in OpenSSH's formats: an Ed25519 private key as
//! `ssh` reads it from `id_rsa` (`openssh-key-v1`, unencrypted) and its public half as one
//! `authorized_keys` line. The caller supplies the key material (this crate has no entropy).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

/// A key pair, as text for `id_rsa` and `id_rsa.pub`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SshKey {
    /// The private key (`-----BEGIN OPENSSH PRIVATE KEY-----` ...).
    pub private: String,
    /// The public key, one `authorized_keys` line.
    pub public: String,
}

fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u32).to_be_bytes());
    out.extend_from_slice(s);
}

impl SshKey {
    /// An Ed25519 key pair from its 32-byte seed and public key (the caller derives the public
    /// key; `check` is the format's random check number), in OpenSSH's formats.
    pub fn ed25519(seed: &[u8; 32], public: &[u8; 32], check: u32, comment: &str) -> Self {
        const KIND: &[u8] = b"ssh-ed25519";
        let mut blob = Vec::new();
        put_string(&mut blob, KIND);
        put_string(&mut blob, public);
        let mut secret = Vec::new();
        secret.extend_from_slice(&check.to_be_bytes());
        secret.extend_from_slice(&check.to_be_bytes());
        put_string(&mut secret, KIND);
        put_string(&mut secret, public);
        let mut pair = seed.to_vec();
        pair.extend_from_slice(public);
        put_string(&mut secret, &pair);
        put_string(&mut secret, comment.as_bytes());
        let mut pad = 1u8;
        while secret.len() % 8 != 0 {
            secret.push(pad);
            pad += 1;
        }
        let mut body = b"openssh-key-v1\0".to_vec();
        put_string(&mut body, b"none");
        put_string(&mut body, b"none");
        put_string(&mut body, b"");
        body.extend_from_slice(&1u32.to_be_bytes());
        put_string(&mut body, &blob);
        put_string(&mut body, &secret);
        let text = STANDARD.encode(&body);
        let mut private = String::from("-----BEGIN OPENSSH PRIVATE KEY-----\n");
        for line in text.as_bytes().chunks(70) {
            private.push_str(&String::from_utf8_lossy(line));
            private.push('\n');
        }
        private.push_str("-----END OPENSSH PRIVATE KEY-----\n");
        let public = format!("ssh-ed25519 {} {comment}\n", STANDARD.encode(&blob));
        Self { private, public }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use super::*;

    fn key() -> SshKey {
        SshKey::ed25519(&[7; 32], &[9; 32], 0xdead_beef, "mpi")
    }

    /// Reads OpenSSH's length-prefixed strings.
    fn strings(mut raw: &[u8], n: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for _ in 0..n {
            let len = u32::from_be_bytes(raw[..4].try_into().expect("len")) as usize;
            out.push(raw[4..4 + len].to_vec());
            raw = &raw[4 + len..];
        }
        out
    }

    #[test]
    fn the_private_key_is_in_openssh_format_with_matching_check_numbers() {
        let k = key();
        let body: String = k
            .private
            .lines()
            .filter(|l| !l.starts_with("-----"))
            .collect();
        assert!(
            k.private
                .lines()
                .all(|l| l.len() <= 70 || l.starts_with("-----"))
        );
        let raw = STANDARD.decode(body).expect("base64");
        let rest = raw.strip_prefix(b"openssh-key-v1\0").expect("magic");
        let head = strings(rest, 3);
        assert_eq!(
            (head[0].as_slice(), head[1].as_slice()),
            (&b"none"[..], &b"none"[..])
        );
        let after = &rest[4 + 4 + 4 + 4 + 4..];
        assert_eq!(u32::from_be_bytes(after[..4].try_into().expect("n")), 1);
        let keys = strings(&after[4..], 2);
        let secret = &keys[1];
        assert_eq!(secret.len() % 8, 0);
        assert_eq!(secret[..4], secret[4..8], "the two check numbers match");
        let fields = strings(&secret[8..], 4);
        assert_eq!(fields[0], b"ssh-ed25519");
        assert_eq!(fields[2].len(), 64, "seed and public key");
        let public = STANDARD
            .decode(k.public.split(' ').nth(1).expect("blob"))
            .expect("base64");
        assert_eq!(
            public, keys[0],
            "id_rsa.pub is the private key's public half"
        );
    }
}
