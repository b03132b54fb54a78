//! Host ports: the ports a pod's containers ask the node for (`hostPort`), and when two of them
//! clash, as kube-scheduler's `NodePorts` filter and the kubelet's admission decide it: the same
//! protocol and port on the same host IP, where the wildcard address (`0.0.0.0`, or no IP given)
//! clashes with every address.

/// The wildcard host IP: a port on it is taken on every address of the node.
pub const ANY_IP: &str = "0.0.0.0";

/// One host port a pod asks for.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    /// The port on the node (1–65535).
    pub port: u16,
    /// `TCP`, `UDP` or `SCTP` (Kubernetes' default is TCP).
    pub protocol: String,
    /// The host IP it binds; [`ANY_IP`] when the pod gives none.
    pub ip: String,
}

impl HostPort {
    /// A port on the wildcard address with Kubernetes' defaults filled in: an empty protocol is
    /// TCP, an empty IP the wildcard.
    pub fn new(port: u16, protocol: &str, ip: &str) -> Self {
        Self {
            port,
            protocol: if protocol.is_empty() {
                "TCP".to_string()
            } else {
                protocol.to_string()
            },
            ip: if ip.is_empty() {
                ANY_IP.to_string()
            } else {
                ip.to_string()
            },
        }
    }

    /// Whether this port and `other` cannot both be held on one node.
    pub fn clashes(&self, other: &HostPort) -> bool {
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || self.ip == ANY_IP || other.ip == ANY_IP)
    }
}

/// Whether any port of `a` clashes with any port of `b`.
pub fn ports_clash(a: &[HostPort], b: &[HostPort]) -> bool {
    a.iter().any(|p| b.iter().any(|q| p.clashes(q)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wildcard_address_clashes_with_every_address_of_the_same_port_and_protocol() {
        let any = HostPort::new(8080, "", "");
        let one = HostPort::new(8080, "TCP", "10.0.0.1");
        let two = HostPort::new(8080, "TCP", "10.0.0.2");
        assert!(any.clashes(&one) && one.clashes(&any));
        assert!(!one.clashes(&two), "two addresses may each hold the port");
        assert!(one.clashes(&one.clone()));
        assert!(
            !any.clashes(&HostPort::new(8080, "UDP", "")),
            "UDP is another port"
        );
        assert!(!any.clashes(&HostPort::new(8081, "TCP", "")));
        assert!(ports_clash(&[two.clone(), any.clone()], &[one]));
        assert!(!ports_clash(&[two], &[HostPort::new(9090, "TCP", "")]));
    }
}
