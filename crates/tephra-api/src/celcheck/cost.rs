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

    fn function_cost(
        &mut self,
        e: &IdedExpr,
        function: &str,
        id: &str,
        target: Option<&Node>,
        args: &[Node],
        arg_costs: &[Range],
    ) -> (Range, Option<Range>) {
        let args_sum = arg_costs.iter().fold(Range::default(), |s, c| s.add(*c));
        // Overload estimators of the sets extension come first.
        if let Some(f) = match id {
            "list_sets_contains_list" | "list_sets_intersects_list" => Some(1.0),
            "list_sets_equivalent_list" => Some(2.0),
            _ => None,
        } && args.len() == 2
        {
            let s0 = args[0].size.unwrap_or(Range::UNKNOWN);
            let s1 = args[1].size.unwrap_or(Range::UNKNOWN);
            let c = s0.mul(s1).factor(f).add(Range::fixed(1));
            return (c.add(args_sum), None);
        }
        if let Some((c, size)) = self.kubernetes_call_cost(function, id, target, args) {
            return (c.add(args_sum), size);
        }
        let sz = |n: &Node| n.size.unwrap_or(Range::UNKNOWN);
        match id {
            "string_format" if target.is_some() => {
                let t = target.map_or(Range::UNKNOWN, sz);
                return (t.factor(STRING_TRAVERSAL).add(args_sum), None);
            }
            "string_to_bytes" if args.len() == 1 => {
                let s = sz(&args[0]);
                return (
                    s.factor(STRING_TRAVERSAL).add(args_sum),
                    Some(Range {
                        min: s.min,
                        max: s.max.saturating_mul(4),
                    }),
                );
            }
            "bytes_to_string" if args.len() == 1 => {
                let s = sz(&args[0]);
                return (
                    s.factor(STRING_TRAVERSAL).add(args_sum),
                    Some(Range {
                        min: s.min / 4,
                        max: s.max,
                    }),
                );
            }
            "strings_quote" if args.len() == 1 => {
                let s = sz(&args[0]);
                return (
                    s.factor(STRING_TRAVERSAL).add(args_sum),
                    Some(Range {
                        min: s.min.saturating_add(2),
                        max: s.max.saturating_mul(2).saturating_add(2),
                    }),
                );
            }
            "starts_with_string" | "ends_with_string" if args.len() == 1 => {
                return (sz(&args[0]).factor(STRING_TRAVERSAL).add(args_sum), None);
            }
            "in_list" if args.len() == 2 => {
                return (sz(&args[1]).factor(1.0).add(args_sum), None);
            }
            "matches_string" if args.len() == 1 => {
                if let Some(t) = target {
                    let s = sz(t).add(Range::fixed(1)).factor(STRING_TRAVERSAL);
                    let r = sz(&args[0]).factor(REGEX_STRING_LENGTH);
                    return (s.mul(r).add(args_sum), None);
                }
            }
            "contains_string" if args.len() == 1 => {
                if let Some(t) = target {
                    let s = sz(t).factor(STRING_TRAVERSAL);
                    let sub = sz(&args[0]).factor(STRING_TRAVERSAL);
                    return (s.mul(sub).add(args_sum), None);
                }
            }
            "logical_or" | "logical_and" if arg_costs.len() == 2 => {
                let (l, r) = (arg_costs[0], arg_costs[1]);
                return (
                    Range {
                        min: l.min,
                        max: l.add(r).max,
                    },
                    None,
                );
            }
            "conditional" if args.len() == 3 => {
                let size = sz(&args[1]).union(sz(&args[2]));
                if let (Some(a), Some(b)) = (self.entry(args[1].expr), self.entry(args[2].expr)) {
                    self.entries.insert(
                        e.id,
                        EntrySize {
                            container: a.container,
                            key: a.key.union(b.key),
                            val: a.val.union(b.val),
                        },
                    );
                }
                let c = arg_costs[0].add(arg_costs[1].union(arg_costs[2]));
                return (c, Some(size));
            }
            "add_string" | "add_bytes" | "add_list" if args.len() == 2 => {
                let size = sz(&args[0]).add(sz(&args[1]));
                if let (Some(a), Some(b)) = (self.entry(args[0].expr), self.entry(args[1].expr)) {
                    self.entries.insert(
                        e.id,
                        EntrySize {
                            container: a.container,
                            key: a.key.union(b.key),
                            val: a.val.union(b.val),
                        },
                    );
                }
                let c = if id == "add_list" {
                    Range::fixed(1).add(args_sum)
                } else {
                    size.factor(STRING_TRAVERSAL).add(args_sum)
                };
                return (c, Some(size));
            }
            "less_string"
            | "greater_string"
            | "less_equals_string"
            | "greater_equals_string"
            | "less_bytes"
            | "greater_bytes"
            | "less_equals_bytes"
            | "greater_equals_bytes"
            | "equals"
            | "not_equals"
                if args.len() == 2 =>
            {
                let smallest = sz(&args[0]).max.min(sz(&args[1]).max);
                let c = Range {
                    min: u64::from(smallest > 0),
                    max: smallest,
                }
                .factor(STRING_TRAVERSAL);
                return (c.add(args_sum), None);
            }
            _ => {}
        }
        (Range::fixed(1).add(args_sum), None)
    }

    /// Kubernetes' `EstimateCallCost` (apiserver `pkg/cel/library/cost.go`), keyed on the
    /// function name.
    fn kubernetes_call_cost(
        &self,
        function: &str,
        id: &str,
        target: Option<&Node>,
        args: &[Node],
    ) -> Option<(Range, Option<Range>)> {
        let one = Range::fixed(1);
        match function {
            "isSorted" | "sum" | "max" | "min" | "indexOf" | "lastIndexOf" => {
                let t = target?;
                match &t.ty {
                    CelType::List(elem) => {
                        let mut el = one;
                        if matches!(**elem, CelType::String | CelType::Bytes) {
                            let path = if t.path.is_empty() {
                                Vec::new()
                            } else {
                                with(&t.path, "@items")
                            };
                            let s = self.estimate_size(&path).unwrap_or(Range::UNKNOWN);
                            el = el.add(s.factor(STRING_TRAVERSAL));
                        }
                        Some((self.node_size(t).mul(el), None))
                    }
                    _ => Some((self.node_size(t).factor(STRING_TRAVERSAL), None)),
                }
            }
            "url" if args.len() == 1 => {
                let s = self.node_size(&args[0]);
                Some((s.factor(STRING_TRAVERSAL), Some(s)))
            }
            "lowerAscii" | "upperAscii" | "substring" | "trim" => {
                let s = self.node_size(target?);
                Some((s.factor(STRING_TRAVERSAL), Some(s)))
            }
            "replace" if target.is_some() && args.len() >= 2 => {
                let s = self.node_size(target?);
                let a = self.node_size(&args[0]);
                let b = self.node_size(&args[1]);
                let (mut count, mut keep) = (Range::default(), Range::default());
                if a.min == 0 {
                    count.max = if s.max < u64::MAX { s.max + 1 } else { s.max };
                    keep.max = s.max;
                } else if b.max <= a.min {
                    keep.max = s.max;
                } else {
                    count.max = (s.max as f64 / a.min as f64).ceil() as u64;
                }
                if a.max == 0 {
                    count.min = if s.min < u64::MAX { s.min + 1 } else { s.min };
                    keep.min = s.min;
                } else if a.max <= b.min {
                    keep.min = s.min;
                } else {
                    count.min = (s.min as f64 / a.max as f64).ceil() as u64;
                }
                let size = count.mul(b).add(keep);
                Some((s.factor(2.0 * STRING_TRAVERSAL), Some(size)))
            }
            "split" => {
                let s = self.node_size(target?);
                let mut max = s.max;
                if let Some(limit) = args.get(1)
                    && let Expr::Literal(LiteralValue::Int(i)) = &limit.expr.expr
                {
                    max = **i as u64;
                }
                Some((
                    s.factor(2.0 * STRING_TRAVERSAL),
                    Some(Range { min: 0, max }),
                ))
            }
            "join" => {
                let t = target?;
                let list = self.node_size(t);
                let elem = if t.path.is_empty() {
                    None
                } else {
                    self.estimate_size(&with(&t.path, "@items"))
                };
                let mut size = elem.map_or(Range::default(), |el| list.mul(el));
                if let Some(sep) = args.first() {
                    let seps = Range {
                        min: list.min.saturating_sub(1),
                        max: list.max.saturating_sub(1),
                    };
                    size = size.add(self.node_size(sep).mul(seps));
                }
                Some((size.factor(STRING_TRAVERSAL), Some(size)))
            }
            "find" | "findAll" if target.is_some() && !args.is_empty() => {
                let s = self.node_size(target?);
                let c = s
                    .add(one)
                    .factor(STRING_TRAVERSAL)
                    .mul(self.node_size(&args[0]).factor(REGEX_STRING_LENGTH));
                Some((c, Some(Range { min: 0, max: s.max })))
            }
            "cidr" | "isIP" | "isCIDR" if !args.is_empty() => {
                Some((self.node_size(&args[0]).factor(STRING_TRAVERSAL), None))
            }
            "ip" if id == "cidr_ip" => Some((one, None)),
            "ip" if !args.is_empty() => {
                Some((self.node_size(&args[0]).factor(STRING_TRAVERSAL), None))
            }
            "ip.isCanonical" if !args.is_empty() => Some((
                self.node_size(&args[0]).factor(2.0 * STRING_TRAVERSAL),
                None,
            )),
            "masked"
            | "prefixLength"
            | "family"
            | "isUnspecified"
            | "isLoopback"
            | "isLinkLocalMulticast"
            | "isLinkLocalUnicast"
            | "isGlobalUnicast" => Some((one, None)),
            "containsIP" if !args.is_empty() => {
                let mut c = Range { min: 8, max: 32 }.factor(STRING_TRAVERSAL);
                if id == "cidr_contains_ip_string" {
                    c = c.add(self.node_size(&args[0]).factor(STRING_TRAVERSAL));
                }
                Some((c, None))
            }
            "quantity" | "isQuantity" | "semver" | "isSemver" if !args.is_empty() => {
                Some((self.node_size(&args[0]).factor(STRING_TRAVERSAL), None))
            }
            "sign" | "asInteger" | "isInteger" | "asApproximateFloat" | "isGreaterThan"
            | "isLessThan" | "compareTo" | "add" | "sub" | "major" | "minor" | "patch"
            | "getScheme" | "getHostname" | "getHost" | "getPort" | "getEscapedPath"
            | "getQuery" => Some((one, None)),
            "_==_" if args.len() == 2 && args[0].ty == args[1].ty => match &args[0].ty {
                CelType::Named("net.IP" | "net.CIDR" | "kubernetes.Quantity") => Some((one, None)),
                CelType::Named("kubernetes.URL") => {
                    let m = args[1].size.map_or(1, |s| s.max);
                    Some((Range { min: 1, max: m }.factor(STRING_TRAVERSAL), None))
                }
                _ => None,
            },
            _ => None,
        }
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
