//! Watch streams: one compact JSON event per line in a chunked 200 response. A watch starts
//! from now (with the current objects as ADDED events first), from a resourceVersion (replaying
//! the kept history after it), or as a watch-list (`sendInitialEvents`, ending the initial
//! events with the `k8s.io/initial-events-end` bookmark). A resourceVersion older than the kept
//! history gets an ERROR event with a 410 Status inside the 200 stream, which is what makes
//! kube-rs's watcher and client-go re-list. Selectors turn a change that makes an object match
//! (or stop matching) into ADDED (or DELETED). Bookmarks, when asked for, carry a
//! resourceVersion no later change of this watch can be at or below.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use hyper::Response;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::api::ApiServer;
use crate::http::{Body, ChannelBody, Req, stream_reply};
use crate::resource::ResourceDef;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::store::{Event, EventType, Obj, Subscriber};
use crate::table;
use crate::wire::{object_bytes, selectors};

struct Filter {
    namespace: Option<String>,
    label: LabelSelector,
    field: FieldSelector,
}

impl Filter {
    fn matches(&self, obj: &Obj) -> bool {
        self.namespace.as_ref().is_none_or(|ns| {
            obj.value
                .get("metadata")
                .and_then(|m| m.get("namespace"))
                .and_then(Value::as_str)
                == Some(ns)
        }) && self.label.matches(&obj.value)
            && self.field.matches(&obj.value)
    }
}

struct Writer {
    def: Arc<ResourceDef>,
    table: Option<String>,
    headers_sent: bool,
    tx: mpsc::Sender<Bytes>,
    last_rv: u64,
    /// Lines not yet handed to the connection; events that arrive together go out as one chunk.
    buf: BytesMut,
    /// The resourceVersion the watch starts after.
    after: u64,
}

/// Flush the pending lines once they reach this size, even if more events are waiting.
const FLUSH_AT: usize = 256 * 1024;

impl Writer {
    fn line(&mut self, type_: &str, obj: &Obj) {
        let body = match &self.table {
            Some(include) => {
                let t = table::table(
                    &self.def,
                    &[&obj.value],
                    obj.rv,
                    None,
                    include,
                    !self.headers_sent,
                );
                self.headers_sent = true;
                Bytes::from(serde_json::to_vec(&t).unwrap_or_default())
            }
            None => object_bytes(&self.def, obj),
        };
        self.buf.reserve(body.len() + 32);
        self.buf.put_slice(b"{\"type\":\"");
        self.buf.put_slice(type_.as_bytes());
        self.buf.put_slice(b"\",\"object\":");
        self.buf.put_slice(&body);
        self.buf.put_slice(b"}\n");
    }

    /// Hands the pending lines to the connection.
    async fn flush(&mut self) -> bool {
        if self.buf.is_empty() {
            return true;
        }
        let chunk = self.buf.split().freeze();
        self.tx.send(chunk).await.is_ok()
    }

    async fn send(&mut self, type_: &str, obj: &Obj) -> bool {
        self.line(type_, obj);
        self.last_rv = self.last_rv.max(obj.rv);
        self.buf.len() < FLUSH_AT || self.flush().await
    }

    async fn raw(&mut self, value: &Value) -> bool {
        let bytes = serde_json::to_vec(value).unwrap_or_default();
        self.buf.put_slice(&bytes);
        self.buf.put_u8(b'\n');
        self.flush().await
    }

    async fn bookmark(&mut self, rv: u64, initial_end: bool) -> bool {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj =
            json!({"kind": self.def.kind, "apiVersion": self.def.api_version(), "metadata": meta});
        self.last_rv = self.last_rv.max(rv);
        self.raw(&json!({"type": "BOOKMARK", "object": obj})).await
    }

    /// Sends one change as this watcher sees it through its selectors.
    async fn event(&mut self, filter: &Filter, ev: &Event) -> bool {
        // A client that asked for a resourceVersion the server has not reached yet gets only
        // the changes after it.
        if ev.rv() <= self.after {
            return true;
        }
        let now = filter.matches(&ev.object);
        let before = ev.prev.as_ref().is_some_and(|p| filter.matches(p));
        let type_ = match ev.type_ {
            EventType::Added if now => EventType::Added,
            EventType::Deleted if before || now => EventType::Deleted,
            EventType::Modified if now && before => EventType::Modified,
            EventType::Modified if now => EventType::Added,
            EventType::Modified if before => EventType::Deleted,
            _ => {
                self.last_rv = self.last_rv.max(ev.rv());
                return true;
            }
        };
        self.send(type_.as_str(), &ev.object).await
    }
}

/// Starts a watch; the response streams until the timeout, the client leaves, or the watcher
/// falls too far behind.
pub fn serve(
    api: &Arc<ApiServer>,
    def: &Arc<ResourceDef>,
    ns: Option<&str>,
    req: &Req,
) -> Result<Response<Body>, ApiError> {
    let (label, field) = selectors(def, req)?;
    let filter = Filter {
        namespace: ns.map(String::from),
        label,
        field,
    };
    let bookmarks = req.q("allowWatchBookmarks") == Some("true");
    let send_initial = req.q("sendInitialEvents") == Some("true");
    if send_initial && !api.options.watch_lists {
        return Err(ApiError::invalid_field(
            "meta.k8s.io",
            "ListOptions",
            "",
            "sendInitialEvents",
            "Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
        ));
    }
    if send_initial && (!bookmarks || req.q("resourceVersionMatch") != Some("NotOlderThan")) {
        return Err(ApiError::invalid_field(
            "meta.k8s.io",
            "ListOptions",
            "",
            "sendInitialEvents",
            "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan and allowWatchBookmarks",
        ));
    }
    let from = match req
        .q("resourceVersion")
        .filter(|r| !r.is_empty() && *r != "0")
    {
        _ if send_initial => None,
        None => None,
        Some(rv) => Some(
            rv.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv:?}")))?,
        ),
    };
    let timeout = req
        .q("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(api.options.default_watch_timeout);
    let (events_tx, mut events) = mpsc::channel(api.options.watch_buffer.max(16));
    let start = api
        .store
        .watch(&def.storage_key(), from, Subscriber::Bounded(events_tx));
    let (tx, body) = ChannelBody::new(256);
    let mut writer = Writer {
        def: def.clone(),
        table: req
            .wants_table()
            .then(|| req.q("includeObject").unwrap_or("Metadata").to_string()),
        headers_sent: false,
        tx,
        last_rv: from.unwrap_or(0),
        buf: BytesMut::new(),
        after: from.unwrap_or(0),
    };
    let api = api.clone();
    let interval = api.options.bookmark_interval;
    tokio::spawn(async move {
        let start = match start {
            Ok(s) => s,
            Err(floor) => {
                let status = ApiError::expired(format!(
                    "too old resource version: {} ({floor})",
                    from.unwrap_or(0)
                ))
                .to_status();
                writer
                    .raw(&json!({"type": "ERROR", "object": status}))
                    .await;
                return;
            }
        };
        for obj in &start.initial {
            if filter.matches(obj) && !writer.send("ADDED", obj).await {
                return;
            }
        }
        if send_initial && !writer.bookmark(start.rv, true).await {
            return;
        }
        writer.last_rv = writer
            .last_rv
            .max(start.rv.min(writer.last_rv.max(from.unwrap_or(0))));
        for ev in &start.backlog {
            if !writer.event(&filter, ev).await {
                return;
            }
        }
        if !writer.flush().await {
            return;
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        loop {
            tokio::select! {
                ev = events.recv() => {
                    let Some(ev) = ev else {
                        writer.flush().await;
                        return;
                    };
                    if !writer.event(&filter, &ev).await {
                        return;
                    }
                    // Whatever else is already queued goes out in the same chunk.
                    while let Ok(ev) = events.try_recv() {
                        if !writer.event(&filter, &ev).await {
                            return;
                        }
                    }
                    if !writer.flush().await {
                        return;
                    }
                }
                _ = tick.tick(), if bookmarks => {
                    if !bookmark_now(&api, &mut writer, &filter, &mut events).await {
                        return;
                    }
                }
                _ = tokio::time::sleep_until(deadline) => {
                    if bookmarks {
                        bookmark_now(&api, &mut writer, &filter, &mut events).await;
                    }
                    return;
                }
                _ = writer.tx.closed() => return,
            }
        }
    });
    Ok(stream_reply(body))
}

/// Every change at or below the store's current resourceVersion is already queued for this
/// watcher (changes are queued under the store's lock): send what is queued, then a bookmark.
async fn bookmark_now(
    api: &ApiServer,
    writer: &mut Writer,
    filter: &Filter,
    events: &mut mpsc::Receiver<Arc<Event>>,
) -> bool {
    let rv = api.store.current_rv();
    loop {
        match events.try_recv() {
            Ok(ev) => {
                if !writer.event(filter, &ev).await {
                    return false;
                }
            }
            Err(mpsc::error::TryRecvError::Empty) => break,
            Err(mpsc::error::TryRecvError::Disconnected) => return false,
        }
    }
    let at = rv.max(writer.last_rv);
    writer.bookmark(at, false).await
}
