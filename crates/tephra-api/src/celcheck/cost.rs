//! The static cost estimate of a checked rule: cel-go's estimator (`checker/cost.go`) with the
//! Kubernetes call-cost and size hooks, as kube-apiserver runs them on CRD validation rules.
//!
//! Sizes come from the schema: a field path such as `self.spec.tasks.@items.name` is looked up
//! in the declared types, whose bounds are `maxItems`, `maxProperties` and `maxLength` or, when
//! those are missing, whatever fits in one request. The quirks of the upstream estimator are
//! kept on purpose (map keys have size 0, schema scalars size 0, `string(dyn)` costs like
//! `bytes_to_string`): the point is to agree with the API server, not to be right.

use std::collections::HashMap;
use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use super::checker::Checked;
use super::types::{CelType, DeclType, Kind, Shape, map_key};

mod calls;

/// A range of sizes or costs; arithmetic saturates at `u64::MAX`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Range {
    /// Lower bound.
    pub min: u64,
    /// Upper bound.
    pub max: u64,
}

impl Range {
    const UNKNOWN: Range = Range {
        min: 0,
        max: u64::MAX,
    };

    /// `n..=n`.
    pub fn fixed(n: u64) -> Self {
        Self { min: n, max: n }
    }
    fn add(self, o: Self) -> Self {
        Self {
            min: self.min.saturating_add(o.min),
            max: self.max.saturating_add(o.max),
        }
    }
    fn mul(self, o: Self) -> Self {
        Self {
            min: self.min.saturating_mul(o.min),
            max: self.max.saturating_mul(o.max),
        }
    }
    fn union(self, o: Self) -> Self {
        Self {
            min: self.min.min(o.min),
            max: self.max.max(o.max),
        }
    }
    fn factor(self, f: f64) -> Self {
        Self {
            min: by_factor(self.min, f),
            max: by_factor(self.max, f),
        }
    }
}

/// `ceil(x * f)`, saturating, as cel-go's `multiplyByCostFactor`.
fn by_factor(x: u64, f: f64) -> u64 {
    let xf = x as f64;
    if xf > 0.0 && f > 0.0 && xf > (u64::MAX as f64) / f {
        return u64::MAX;
    }
    let c = (xf * f).ceil();
    if c >= 18_446_744_073_709_551_616.0 {
        u64::MAX
    } else {
        c as u64
    }
}

const STRING_TRAVERSAL: f64 = 0.1;
const REGEX_STRING_LENGTH: f64 = 0.25;
const LIST_CREATE: u64 = 10;
const MAP_CREATE: u64 = 30;
const STRUCT_CREATE: u64 = 40;
const ACCUMULATOR: &str = "@result";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Container {
    List,
    Map,
}

#[derive(Clone, Copy, Debug)]
struct EntrySize {
    container: Container,
    key: Range,
    val: Range,
}

#[derive(Clone, Debug)]
struct Local {
    path: Vec<String>,
    size: Option<Range>,
    entry: Option<EntrySize>,
}

/// What a function estimator sees of an argument or target.
struct Node<'a> {
    expr: &'a IdedExpr,
    path: Vec<String>,
    ty: CelType,
    size: Option<Range>,
}

/// Estimates the cost of `expr`, checked as `checked`, with `self` of type `root`.
pub fn estimate(expr: &IdedExpr, checked: &Checked, root: &Arc<DeclType>) -> Range {
    let mut c = Coster {
        checked,
        root,
        paths: HashMap::new(),
        sizes: HashMap::new(),
        entries: HashMap::new(),
        locals: HashMap::new(),
    };
    c.cost(expr)
}

struct Coster<'a> {
    checked: &'a Checked,
    root: &'a Arc<DeclType>,
    paths: HashMap<u64, Vec<String>>,
    sizes: HashMap<u64, Range>,
    entries: HashMap<u64, EntrySize>,
    locals: HashMap<String, Vec<Local>>,
}

impl Coster<'_> {
    fn ty(&self, e: &IdedExpr) -> CelType {
        self.checked
            .types
            .get(&e.id)
            .cloned()
            .unwrap_or(CelType::Dyn)
    }

    fn local(&self, name: &str) -> Option<&Local> {
        self.locals.get(name).and_then(|v| v.last())
    }

    fn push_local(&mut self, name: &str, local: Local) {
        self.locals.entry(name.to_string()).or_default().push(local);
    }

    fn pop_local(&mut self, name: &str) {
        if let Some(v) = self.locals.get_mut(name) {
            v.pop();
        }
    }

    fn path(&self, e: &IdedExpr) -> Vec<String> {
        if let Expr::Ident(name) = &e.expr
            && let Some(l) = self.local(name)
        {
            return l.path.clone();
        }
        self.paths.get(&e.id).cloned().unwrap_or_default()
    }

    /// The Kubernetes size estimator: walks the declared types along a path, whose first
    /// element (the variable) is ignored.
    fn estimate_size(&self, path: &[String]) -> Option<Range> {
        if path.is_empty() {
            return None;
        }
        let key = map_key();
        let mut cur: &Arc<DeclType> = self.root;
        for step in &path[1..] {
            cur = match (step.as_str(), &cur.shape) {
                ("@items", Shape::List(e)) | ("@values", Shape::Map(e)) => e,
                ("@keys", Shape::Map(_)) => &key,
                (name, Shape::Object(fields)) => fields.get(name)?,
                _ => return None,
            };
        }
        Some(Range {
            min: 0,
            max: u64::try_from(cur.max_elements).unwrap_or(0),
        })
    }

    /// cel-go's `computeSize`.
    fn size(&mut self, e: &IdedExpr) -> Option<Range> {
        if let Some(s) = self.sizes.get(&e.id) {
            return Some(*s);
        }
        if let Some(s) = literal_size(e) {
            return Some(s);
        }
        if let Some(s) = self.estimate_size(&self.path(e)) {
            self.sizes.insert(e.id, s);
            return Some(s);
        }
        if self.ty(e).is_scalar() {
            return Some(Range::fixed(1));
        }
        if let Expr::Ident(name) = &e.expr
            && let Some(s) = self.local(name).and_then(|l| l.size)
        {
            return Some(s);
        }
        None
    }

    fn size_or_unknown(&mut self, e: &IdedExpr) -> Range {
        self.size(e).unwrap_or(Range::UNKNOWN)
    }

    fn entry(&self, e: &IdedExpr) -> Option<EntrySize> {
        if let Some(s) = self.entries.get(&e.id) {
            return Some(*s);
        }
        if let Expr::Ident(name) = &e.expr {
            return self.local(name).and_then(|l| l.entry);
        }
        None
    }

    fn node<'e>(&mut self, e: &'e IdedExpr) -> Node<'e> {
        let mut path = self.path(e);
        if path
            .first()
            .is_some_and(|p| p == ACCUMULATOR || p == "__result__")
        {
            path.clear();
        }
        Node {
            expr: e,
            path,
            ty: self.ty(e),
            size: self.size(e),
        }
    }

    /// Kubernetes' `sizeEstimate`: the node's computed size, else the schema's, else unknown.
    fn node_size(&self, n: &Node) -> Range {
        n.size
            .or_else(|| self.estimate_size(&n.path))
            .unwrap_or(Range::UNKNOWN)
    }

    fn cost(&mut self, e: &IdedExpr) -> Range {
        match &e.expr {
            Expr::Literal(_) | Expr::Unspecified => Range::default(),
            Expr::Ident(name) => {
                let path = match self.local(name) {
                    Some(l) => l.path.clone(),
                    None => vec![name.clone()],
                };
                self.paths.insert(e.id, path);
                Range::fixed(1)
            }
            Expr::Select(sel) => {
                if sel.test {
                    // has(): free apart from its operand (PresenceTestHasCost(false)).
                    return self.cost(&sel.operand);
                }
                let mut sum = self.cost(&sel.operand);
                if matches!(
                    self.ty(&sel.operand).kind(),
                    Kind::Map | Kind::Struct | Kind::Param
                ) {
                    sum = sum.add(Range::fixed(1));
                }
                let mut path = self.path(&sel.operand);
                path.push(sel.field.clone());
                self.paths.insert(e.id, path);
                sum
            }
            Expr::Call(_) => self.call(e),
            Expr::List(list) => {
                let mut sum = Range::default();
                let mut item = Range {
                    min: if list.elements.is_empty() {
                        0
                    } else {
                        u64::MAX
                    },
                    max: 0,
                };
                for el in &list.elements {
                    sum = sum.add(self.cost(el));
                    let s = self.size_or_unknown(el);
                    item = item.union(s);
                }
                self.entries.insert(
                    e.id,
                    EntrySize {
                        container: Container::List,
                        key: Range::fixed(1),
                        val: item,
                    },
                );
                sum.add(Range::fixed(LIST_CREATE))
            }
            Expr::Map(map) => {
                let mut sum = Range::default();
                let empty = map.entries.is_empty();
                let mut key = Range {
                    min: if empty { 0 } else { u64::MAX },
                    max: 0,
                };
                let mut val = key;
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(me) = &entry.expr {
                        sum = sum.add(self.cost(&me.key)).add(self.cost(&me.value));
                        let ks = self.size_or_unknown(&me.key);
                        let vs = self.size_or_unknown(&me.value);
                        key = key.union(ks);
                        val = val.union(vs);
                    }
                }
                self.entries.insert(
                    e.id,
                    EntrySize {
                        container: Container::Map,
                        key,
                        val,
                    },
                );
                sum.add(Range::fixed(MAP_CREATE))
            }
            Expr::Struct(s) => {
                let mut sum = Range::default();
                for entry in &s.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        sum = sum.add(self.cost(&f.value));
                    }
                }
                sum.add(Range::fixed(STRUCT_CREATE))
            }
            Expr::Comprehension(_) => self.comprehension(e),
        }
    }

    fn comprehension(&mut self, e: &IdedExpr) -> Range {
        let Expr::Comprehension(comp) = &e.expr else {
            return Range::default();
        };
        let range = &comp.iter_range;
        let is_bind = matches!(&range.expr, Expr::List(l) if l.elements.is_empty())
            && matches!(
                &comp.loop_cond.expr,
                Expr::Literal(LiteralValue::Boolean(b)) if !**b
            )
            && comp.accu_var != ACCUMULATOR;
        let mut sum = self.cost(range).add(self.cost(&comp.accu_init));
        let accu = Local {
            path: self.path(&comp.accu_init),
            size: self.size(&comp.accu_init),
            entry: self.entry(&comp.accu_init),
        };
        self.push_local(&comp.accu_var, accu);
        if is_bind {
            sum = sum.add(self.cost(&comp.result));
            self.pop_local(&comp.accu_var);
            if let Some(s) = self.size(&comp.result) {
                self.sizes.insert(e.id, s);
            }
            if let Some(en) = self.entry(&comp.result) {
                self.entries.insert(e.id, en);
            }
            return sum;
        }
        let entry = self.entry(range);
        let container = match entry.map(|en| en.container) {
            Some(c) => Some(c),
            None => match self.ty(range).kind() {
                Kind::List => Some(Container::List),
                Kind::Map => Some(Container::Map),
                _ => None,
            },
        };
        let base = self.path(range);
        match &comp.iter_var2 {
            Some(v2) => {
                let (kp, vp) = if container == Some(Container::List) {
                    ("@indices", "@items")
                } else {
                    ("@keys", "@values")
                };
                let key = Local {
                    path: with(&base, kp),
                    size: entry.map(|en| en.key),
                    entry: None,
                };
                let val = Local {
                    path: with(&base, vp),
                    size: entry.map(|en| en.val),
                    entry: None,
                };
                self.push_local(&comp.iter_var, key);
                self.push_local(v2, val);
            }
            None => {
                let (sub, size) = if container == Some(Container::List) {
                    ("@items", entry.map(|en| en.val))
                } else {
                    ("@keys", entry.map(|en| en.key))
                };
                self.push_local(
                    &comp.iter_var,
                    Local {
                        path: with(&base, sub),
                        size,
                        entry: None,
                    },
                );
            }
        }
        let loop_cost = self.cost(&comp.loop_cond);
        let step_cost = self.cost(&comp.loop_step);
        self.pop_local(&comp.iter_var);
        if let Some(v2) = &comp.iter_var2 {
            self.pop_local(v2);
        }
        sum = sum.add(self.cost(&comp.result));
        self.pop_local(&comp.accu_var);
        let n = self.size_or_unknown(range);
        sum = sum.add(n.mul(step_cost.add(loop_cost)));
        match &comp.accu_init.expr {
            Expr::Literal(_) => {
                if let Some(s) = self.size(&comp.accu_init) {
                    self.sizes.insert(e.id, s);
                }
            }
            Expr::List(_) | Expr::Map(_) => {
                self.sizes.insert(e.id, n);
                if let Some(en) = self.entry(&comp.loop_step) {
                    self.entries.insert(e.id, en);
                }
            }
            _ => {}
        }
        sum
    }

    fn call(&mut self, e: &IdedExpr) -> Range {
        let Expr::Call(call) = &e.expr else {
            return Range::default();
        };
        if call.func_name == "dyn" && call.target.is_none() && call.args.len() == 1 {
            let arg = &call.args[0];
            let c = Range::fixed(1).add(self.cost(arg));
            if let Some(s) = self.size(arg) {
                self.sizes.insert(e.id, s);
            }
            if let Some(en) = self.entry(arg) {
                self.entries.insert(e.id, en);
            }
            return c;
        }
        // A qualified global written as a member call (`sets.contains(...)`) has no target.
        let qualified = self.checked.qualified.get(&e.id).copied();
        let function = qualified.unwrap_or(call.func_name.as_str());
        let mut arg_costs = Vec::with_capacity(call.args.len());
        let mut arg_nodes = Vec::with_capacity(call.args.len());
        for arg in &call.args {
            arg_costs.push(self.cost(arg));
            arg_nodes.push(self.node(arg));
        }
        let ids = match self.checked.overloads.get(&e.id) {
            Some(ids) if !ids.is_empty() => ids.clone(),
            _ => return Range::default(),
        };
        let mut sum = Range::default();
        let target = match (&call.target, qualified) {
            (Some(t), None) => {
                sum = sum.add(self.cost(t));
                Some(self.node(t))
            }
            _ => None,
        };
        let mut fn_cost = Range {
            min: u64::MAX,
            max: 0,
        };
        let mut result: Option<Range> = None;
        for id in ids {
            let (cost, size) =
                self.function_cost(e, function, id, target.as_ref(), &arg_nodes, &arg_costs);
            fn_cost = fn_cost.union(cost);
            if let Some(s) = size {
                result = Some(result.map_or(s, |r| r.union(s)));
            }
            if (id == "index_list" || id == "index_map")
                && let Some(first) = call.args.first()
            {
                result = self.entry(first).map(|en| en.val);
                let sub = if id == "index_list" {
                    "@items"
                } else {
                    "@values"
                };
                let path = with(&self.path(first), sub);
                self.paths.insert(e.id, path);
            }
            if result.is_none() {
                result = self.size(e);
            }
        }
        if let Some(s) = result {
            self.sizes.insert(e.id, s);
        }
        sum.add(fn_cost)
    }
}

fn with(path: &[String], last: &str) -> Vec<String> {
    let mut p = path.to_vec();
    p.push(last.to_string());
    p
}

/// Sizes cel-go knows from the expression itself: literals and list or map literals.
fn literal_size(e: &IdedExpr) -> Option<Range> {
    let n = match &e.expr {
        Expr::Literal(lit) => match lit {
            LiteralValue::String(s) => s.chars().count() as u64,
            LiteralValue::Bytes(b) => b.len() as u64,
            _ => 1,
        },
        Expr::List(l) => l.elements.len() as u64,
        Expr::Map(m) => m.entries.len() as u64,
        _ => return None,
    };
    Some(Range::fixed(n))
}
