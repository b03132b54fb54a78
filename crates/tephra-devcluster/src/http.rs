//! HTTP plumbing shared by the handlers: request parts the handlers read (query, headers,
//! body), response bodies (whole, or a stream of watch lines), and JSON and `Status` replies.

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use hyper::{Response, StatusCode};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::status::ApiError;

/// The response body type.
pub type Body = BoxBody<Bytes, Infallible>;

/// A body fed line by line from a channel (a watch stream); it ends when the sender is dropped.
pub struct ChannelBody {
    rx: mpsc::Receiver<Bytes>,
}

impl ChannelBody {
    /// A body and the sender that feeds it.
    pub fn new(buffer: usize) -> (mpsc::Sender<Bytes>, Self) {
        let (tx, rx) = mpsc::channel(buffer);
        (tx, Self { rx })
    }
}

impl HttpBody for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx
            .poll_recv(cx)
            .map(|chunk| chunk.map(|b| Ok(Frame::data(b))))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

/// What a handler reads from a request.
pub struct Req {
    /// HTTP method.
    pub method: hyper::Method,
    /// Decoded query parameters.
    pub query: HashMap<String, String>,
    /// `Accept`.
    pub accept: String,
    /// `Content-Type`.
    pub content_type: String,
    /// `User-Agent`.
    pub user_agent: String,
    /// The body.
    pub body: Bytes,
    /// Who asks, when RBAC judges them (None: an administrator). Admission checks that
    /// authorize more than the request itself (a create by apply, owner references) use it.
    pub user: Option<crate::authz::User>,
}

impl Req {
    /// A query parameter.
    pub fn q(&self, name: &str) -> Option<&str> {
        self.query.get(name).map(String::as_str)
    }

    /// Whether the client asked for server-side printing.
    pub fn wants_table(&self) -> bool {
        self.accept.contains("as=Table")
    }

    /// Whether the client asked for metadata only.
    pub fn wants_metadata(&self) -> bool {
        self.accept.contains("as=PartialObjectMetadata")
    }

    /// The body as JSON (an empty body is `null`; a protobuf body of a kind kubectl creates is
    /// decoded, see `protobuf.rs`).
    pub fn json(&self) -> Result<Value, ApiError> {
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Null);
        }
        if self
            .content_type
            .starts_with("application/vnd.kubernetes.protobuf")
        {
            return crate::protobuf::decode(&self.body);
        }
        serde_json::from_slice(&self.body).or_else(|e| {
            // kubectl sends JSON; YAML bodies are accepted as the real server does.
            std::str::from_utf8(&self.body)
                .ok()
                .and_then(|t| serde_saphyr::from_str::<Value>(t).ok())
                .ok_or_else(|| {
                    ApiError::bad_request(format!("the body of the request is not valid JSON: {e}"))
                })
        })
    }
}

/// Decodes `a=1&b=x%3Dy` (`+` is a space).
pub fn parse_query(query: &str) -> HashMap<String, String> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A JSON reply from bytes already serialized.
pub fn bytes_reply(
    code: u16,
    body: Bytes,
    content_type: &str,
    warnings: &[String],
) -> Response<Body> {
    let mut builder = Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::OK))
        .header("Content-Type", content_type)
        .header("Cache-Control", "no-cache, private");
    for w in warnings {
        let text = w.replace('"', "\\\"");
        builder = builder.header("Warning", format!("299 - \"{text}\""));
    }
    builder
        .body(Full::new(body).boxed())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

/// A JSON reply.
pub fn json_reply(code: u16, value: &Value, warnings: &[String]) -> Response<Body> {
    let body = serde_json::to_vec(value).unwrap_or_default();
    bytes_reply(code, Bytes::from(body), "application/json", warnings)
}

/// A `Status` error reply.
pub fn error_reply(err: &ApiError) -> Response<Body> {
    let mut resp = json_reply(err.code, &err.to_status(), &[]);
    if let Some(secs) = err.retry_after()
        && let Ok(v) = hyper::header::HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert("Retry-After", v);
    }
    resp
}

/// A streamed reply.
pub fn stream_reply(body: ChannelBody) -> Response<Body> {
    Response::builder()
        .status(StatusCode::OK)
        .header("Content-Type", "application/json")
        .header("Cache-Control", "no-cache, private")
        .body(body.boxed())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_decode_percent_and_plus() {
        let q = parse_query("fieldSelector=spec.nodeName%3Dn1&labelSelector=app+in+(a)&limit=5&");
        assert_eq!(q["fieldSelector"], "spec.nodeName=n1");
        assert_eq!(q["labelSelector"], "app in (a)");
        assert_eq!(q["limit"], "5");
        assert_eq!(parse_query("a=%zz")["a"], "%zz");
    }
}
