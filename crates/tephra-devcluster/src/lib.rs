//! tephra-devcluster: a small Kubernetes on one machine, for integration tests and `tephra dev`.
//!
//! An in-memory API server that real clients (kube-rs, `kubectl`) talk to over HTTPS with a
//! bearer token (RBAC for service accounts' tokens): discovery, openapi, built-in kinds and CRDs (with their schema defaults,
//! pruning and CEL rules, through `tephra_api::admission`), list and watch with resource
//! versions, every patch type, the status, binding and eviction subresources. Simulated kubelets
//! run the pods bound to a fleet's nodes. See README, "A Kubernetes on one machine".

pub mod admit;
pub mod admit_pod;
pub mod admit_storage;
pub mod api;
pub mod authz;
pub mod authz_admission;
pub mod builtin_schema;
pub mod claims;
pub mod cluster;
pub mod conditions;
pub mod controller;
pub mod crd;
pub mod defaults;
mod deletion;
pub mod discovery;
pub mod error;
pub mod events;
pub mod faults;
pub mod fleet;
mod gc;
pub mod handlers;
pub mod http;
pub mod jsonpath;
pub mod kubeconfig;
pub mod kubelet;
pub mod kubelet_proxy;
mod namespaces;
pub mod openapi;
pub mod pagination;
pub mod patch;
pub mod pod_log;
pub mod podgroup_protection;
pub mod protobuf;
pub mod prune;
pub mod quantity;
pub mod registry;
pub mod resource;
pub mod router;
pub mod selector;
pub mod server;
pub mod status;
pub mod store;
pub mod subresource;
pub mod table;
pub mod time;
pub mod tls;
pub mod validate;
pub mod validate_dra;
pub mod validate_workload;
pub mod volumes;
pub mod wait;
pub mod watch;
pub mod wire;

pub use api::{ApiServer, ServerOptions};
pub use cluster::{DevCluster, Handle, Options};
pub use error::Error;
pub use server::Server;
