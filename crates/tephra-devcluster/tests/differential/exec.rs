//! One side of the comparison (the devcluster or kube-apiserver) and how a generated step
//! reaches it: the request as raw HTTP through kube-rs (so every code and `Status` comes back
//! as sent), the placeholders a step carries resolved from what this side answered before
//! (`{rv:KEY}`, `{rv0:KEY}`, `{uid:KEY}`, `{name:KEY}`, `{listrv:KEY}`, and a PUT body that is
//! the last object this side returned for a key), and watches read in the background.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use serde_json::{Value, json};

/// Who sends a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    /// The cluster's administrator.
    Admin,
    /// The service account `diff-rbac/limited`, bound per sequence to a Role that grants only
    /// some verbs.
    Limited,
}

/// A PUT body: the last object this side returned for `key`, with `patch` (a JSON merge
/// patch) applied and, when `stale`, the first resourceVersion seen for it.
#[derive(Clone, Debug)]
pub struct FromMemory {
    pub key: String,
    pub patch: Value,
    pub stale: bool,
}

/// A request.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: http::Method,
    /// The path; placeholders allowed.
    pub path: String,
    /// Query parameters; placeholders allowed in values.
    pub query: Vec<(String, String)>,
    pub content_type: Option<&'static str>,
    pub body: Option<Value>,
    /// Instead of `body`: an object remembered from an earlier answer.
    pub from_memory: Option<FromMemory>,
    pub who: Who,
    /// The object the call addresses (`configmaps/cm-1`): its answer is remembered under it.
    pub key: Option<String>,
}

/// One step of a sequence.
#[derive(Clone, Debug)]
pub enum Step {
    /// A request.
    Call(Call),
    /// Starts watch `id` on a collection path.
    WatchOpen {
        id: usize,
        path: String,
        query: Vec<(String, String)>,
    },
    /// Ends watch `id` and compares what it received.
    WatchClose { id: usize },
    /// Gives the garbage collector time, then compares every object of the sequence.
    Settle,
}

/// What a side answered.
#[derive(Clone, Debug)]
pub struct Answer {
    pub code: u16,
    /// The body as JSON (a string when it was not JSON).
    pub body: Value,
}

/// What a side has answered so far, to resolve placeholders and to name uids.
#[derive(Default)]
pub struct Memory {
    rvs: HashMap<String, Vec<String>>,
    uids: HashMap<String, String>,
    names: HashMap<String, String>,
    objects: HashMap<String, Value>,
    list_rvs: HashMap<String, String>,
    /// Every uid seen, named after the key it was seen under (`uid(configmaps/cm-1#2)`).
    pub uid_names: HashMap<String, String>,
    generations: HashMap<String, usize>,
}

impl Memory {
    fn resolve_one(&self, kind: &str, key: &str) -> String {
        match kind {
            "rv" => self
                .rvs
                .get(key)
                .and_then(|v| v.last())
                .cloned()
                .unwrap_or_else(|| "1".into()),
            "rv0" => self
                .rvs
                .get(key)
                .and_then(|v| v.first())
                .cloned()
                .unwrap_or_else(|| "1".into()),
            "uid" => self
                .uids
                .get(key)
                .cloned()
                .unwrap_or_else(|| "00000000-0000-4000-8000-000000000000".into()),
            "name" => self
                .names
                .get(key)
                .cloned()
                .unwrap_or_else(|| "never-named".into()),
            "listrv" => self
                .list_rvs
                .get(key)
                .cloned()
                .unwrap_or_else(|| "1".into()),
            _ => format!("{{{kind}:{key}}}"),
        }
    }

    /// `text` with every `{kind:KEY}` placeholder replaced.
    pub fn resolve_str(&self, text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find('{') {
            let Some(len) = rest[start..].find('}') else {
                break;
            };
            let inner = &rest[start + 1..start + len];
            match inner.split_once(':') {
                Some((kind, key))
                    if matches!(kind, "rv" | "rv0" | "uid" | "name" | "listrv")
                        && !key.contains('"') =>
                {
                    out.push_str(&rest[..start]);
                    out.push_str(&self.resolve_one(kind, key));
                }
                _ => out.push_str(&rest[..start + len + 1]),
            }
            rest = &rest[start + len + 1..];
        }
        out.push_str(rest);
        out
    }

    /// `value` with every placeholder in its strings replaced.
    pub fn resolve(&self, value: &Value) -> Value {
        match value {
            Value::String(s) if s.contains('{') => Value::String(self.resolve_str(s)),
            Value::Array(a) => Value::Array(a.iter().map(|v| self.resolve(v)).collect()),
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), self.resolve(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    fn name_uid(&mut self, key: &str, uid: &str) {
        if uid.is_empty() || self.uid_names.contains_key(uid) {
            return;
        }
        let n = self.generations.entry(key.to_string()).or_default();
        *n += 1;
        self.uid_names
            .insert(uid.to_string(), format!("uid({key}#{n})"));
    }

    /// The key of the object `generateName` named `name` on this side, if it is one (a name
    /// generated for an object that was refused is `generated`).
    pub fn generated_key(&self, name: &str) -> Option<String> {
        if let Some((k, _)) = self
            .names
            .iter()
            .find(|(k, n)| n.as_str() == name && k.contains("/gen-"))
        {
            return Some(k.clone());
        }
        // The generator's prefixes: `g-` and `diff-<seq>-g-`.
        match name.rsplit_once("g-") {
            Some((head, s))
                if s.len() == 5
                    && s.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                    && (head.is_empty() || head.starts_with("diff-")) =>
            {
                Some("generated".into())
            }
            _ => None,
        }
    }

    /// Remembers an object seen under `key`.
    pub fn remember_object(&mut self, key: &str, obj: &Value) {
        let text = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or_default();
        let (rv, uid, name) = (
            text("/metadata/resourceVersion"),
            text("/metadata/uid"),
            text("/metadata/name"),
        );
        if !rv.is_empty() {
            let rvs = self.rvs.entry(key.to_string()).or_default();
            if rvs.last().map(String::as_str) != Some(rv) {
                rvs.push(rv.to_string());
            }
        }
        if !uid.is_empty() {
            if self.uids.get(key).map(String::as_str) != Some(uid) {
                // A new object under the key: its versions start again.
                self.rvs.insert(key.to_string(), vec![rv.to_string()]);
            }
            self.uids.insert(key.to_string(), uid.to_string());
            self.name_uid(key, uid);
        }
        if !name.is_empty() {
            self.names.insert(key.to_string(), name.to_string());
        }
        self.objects.insert(key.to_string(), obj.clone());
    }

    /// Remembers what a call was answered.
    pub fn remember(&mut self, call: &Call, answer: &Answer) {
        let Some(key) = &call.key else {
            return;
        };
        if !(200..300).contains(&answer.code) {
            return;
        }
        let kind = answer
            .body
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if kind.ends_with("List") {
            if let Some(rv) = answer
                .body
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
            {
                self.list_rvs.insert(key.clone(), rv.to_string());
            }
            return;
        }
        if kind == "Status" || answer.body.pointer("/metadata/name").is_none() {
            return;
        }
        self.remember_object(key, &answer.body);
    }

    /// Names the uids of objects seen outside calls (watch events, snapshots) by their
    /// `plural/name`, unless they have a name already.
    pub fn learn_uid(&mut self, plural: &str, obj: &Value) {
        let text = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or_default();
        let key = format!("{plural}/{}", text("/metadata/name"));
        let uid = text("/metadata/uid").to_string();
        self.name_uid(&key, &uid);
    }

    fn body_of(&self, m: &FromMemory) -> Value {
        let mut obj = self
            .objects
            .get(&m.key)
            .cloned()
            .unwrap_or_else(|| json!({}));
        json_patch::merge(&mut obj, &m.patch);
        if m.stale
            && let Some(rv) = self.rvs.get(&m.key).and_then(|v| v.first())
            && obj.get("metadata").is_some_and(Value::is_object)
        {
            obj["metadata"]["resourceVersion"] = json!(rv);
        }
        obj
    }
}

/// One side: its clients and what it has answered.
pub struct Side {
    pub admin: kube::Client,
    pub limited: kube::Client,
    pub memory: Memory,
    watches: HashMap<usize, Watch>,
}

struct Watch {
    events: Arc<Mutex<Vec<Value>>>,
    last: Arc<Mutex<Instant>>,
    task: tokio::task::JoinHandle<()>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Side {
    pub fn new(admin: kube::Client, limited: kube::Client) -> Self {
        Self {
            admin,
            limited,
            memory: Memory::default(),
            watches: HashMap::new(),
        }
    }

    /// A fresh memory for the next sequence (watches are closed).
    pub fn reset(&mut self) {
        for (_, w) in self.watches.drain() {
            w.task.abort();
        }
        self.memory = Memory::default();
    }

    fn uri(&self, path: &str, query: &[(String, String)]) -> String {
        let path = self.memory.resolve_str(path);
        if query.is_empty() {
            return path;
        }
        let q: Vec<String> = query
            .iter()
            .map(|(k, v)| format!("{k}={}", encode(&self.memory.resolve_str(v))))
            .collect();
        format!("{path}?{}", q.join("&"))
    }

    /// The request this side is sent for `call` (as text, for reports).
    pub fn describe(&self, call: &Call) -> String {
        let body = self.body(call);
        format!(
            "{} {}{}",
            call.method,
            self.uri(&call.path, &call.query),
            body.map(|b| format!(" {b}")).unwrap_or_default()
        )
    }

    fn body(&self, call: &Call) -> Option<Value> {
        if let Some(m) = &call.from_memory {
            return Some(self.memory.body_of(m));
        }
        call.body.as_ref().map(|b| self.memory.resolve(b))
    }

    /// Sends a call and remembers the answer.
    pub async fn call(&mut self, call: &Call) -> Answer {
        let answer = self.send(call).await;
        self.memory.remember(call, &answer);
        answer
    }

    async fn send(&self, call: &Call) -> Answer {
        let body = self
            .body(call)
            .map(|b| serde_json::to_vec(&b).unwrap_or_default())
            .unwrap_or_default();
        let mut req = http::Request::builder()
            .method(call.method.clone())
            .uri(self.uri(&call.path, &call.query))
            .header("Accept", "application/json");
        if let Some(ct) = call.content_type {
            req = req.header("Content-Type", ct);
        } else if !body.is_empty() {
            req = req.header("Content-Type", "application/json");
        }
        let req = match req.body(kube::client::Body::from(body)) {
            Ok(r) => r,
            Err(e) => return transport_error(&e.to_string()),
        };
        let client = match call.who {
            Who::Admin => &self.admin,
            Who::Limited => &self.limited,
        };
        let res = match client.send(req).await {
            Ok(r) => r,
            Err(e) => return transport_error(&e.to_string()),
        };
        let code = res.status().as_u16();
        let bytes = match res.into_body().collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) => return transport_error(&e.to_string()),
        };
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        Answer { code, body }
    }

    /// Starts a watch in the background.
    pub async fn watch_open(
        &mut self,
        id: usize,
        path: &str,
        query: &[(String, String)],
    ) -> Answer {
        let mut query = query.to_vec();
        query.push(("watch".into(), "true".into()));
        let req = http::Request::builder()
            .method(http::Method::GET)
            .uri(self.uri(path, &query))
            .header("Accept", "application/json")
            .body(kube::client::Body::from(Vec::new()));
        let req = match req {
            Ok(r) => r,
            Err(e) => return transport_error(&e.to_string()),
        };
        let res = match self.admin.send(req).await {
            Ok(r) => r,
            Err(e) => return transport_error(&e.to_string()),
        };
        let code = res.status().as_u16();
        let events = Arc::new(Mutex::new(Vec::new()));
        let last = Arc::new(Mutex::new(Instant::now()));
        let (ev, la) = (events.clone(), last.clone());
        let mut body = res.into_body();
        let task = tokio::spawn(async move {
            let mut buf: Vec<u8> = Vec::new();
            while let Some(Ok(frame)) = body.frame().await {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                buf.extend_from_slice(&data);
                while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=nl).collect();
                    if let Ok(v) = serde_json::from_slice::<Value>(&line) {
                        lock(&ev).push(v);
                        *lock(&la) = Instant::now();
                    }
                }
            }
        });
        self.watches.insert(id, Watch { events, last, task });
        Answer {
            code,
            body: json!({"watch": "started"}),
        }
    }

    /// Ends a watch once it has been quiet for `quiet` (or `limit` passed): its events.
    pub async fn watch_close(&mut self, id: usize, quiet: Duration, limit: Duration) -> Vec<Value> {
        let Some(w) = self.watches.remove(&id) else {
            return Vec::new();
        };
        let asked = Instant::now();
        let deadline = asked + limit;
        loop {
            // Quiet since the last event and since the close was asked for: an event of the
            // request just answered may still be on its way.
            let since = lock(&w.last).elapsed().min(asked.elapsed());
            if since >= quiet || Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(quiet.saturating_sub(since)).await;
        }
        w.task.abort();
        std::mem::take(&mut *lock(&w.events))
    }
}

fn transport_error(text: &str) -> Answer {
    Answer {
        code: 0,
        body: Value::String(format!("transport error: {text}")),
    }
}
