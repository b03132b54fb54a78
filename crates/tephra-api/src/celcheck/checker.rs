//! Type checking of a parsed rule against the declared type of its schema node, as cel-go's
//! checker does it: identifiers and fields must exist, and every call must match an overload
//! of a declared function (global or member, as declared). The result records, per expression,
//! its type and the overload ids that matched, which is what the cost estimator reads.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use super::env::{Overload, functions, type_identifier};
use super::types::{CelType, DeclType, Shape};

/// Types and resolved overloads of a checked expression, by expression id.
#[derive(Debug, Default)]
pub struct Checked {
    /// The type of each expression.
    pub types: HashMap<u64, CelType>,
    /// The overload ids each call resolved to, in declaration order.
    pub overloads: HashMap<u64, Vec<&'static str>>,
    /// Calls written as `target.f()` that are really qualified global names (`sets.contains`).
    pub qualified: HashMap<u64, &'static str>,
}

/// Checks `expr` with `self` (and `oldSelf`) of type `root`. Errors read as cel-go's.
pub fn check(expr: &IdedExpr, root: &Arc<DeclType>) -> Result<Checked, String> {
    let (checked, t) = check_any(expr, root)?;
    if !matches!(t, CelType::Bool | CelType::Dyn) {
        return Err("cel expression must evaluate to a bool".into());
    }
    Ok(checked)
}

/// Checks `expr` as [`check`] does, whatever type it has; returns that type besides.
pub fn check_any(expr: &IdedExpr, root: &Arc<DeclType>) -> Result<(Checked, CelType), String> {
    let mut c = Checker {
        root: root.cel_type(),
        scopes: Vec::new(),
        out: Checked::default(),
    };
    let t = c.expr(expr)?;
    Ok((c.out, t))
}

struct Checker {
    root: CelType,
    scopes: Vec<(String, CelType)>,
    out: Checked,
}

impl Checker {
    fn set(&mut self, id: u64, t: CelType) -> CelType {
        self.out.types.insert(id, t.clone());
        t
    }

    fn local(&self, name: &str) -> Option<CelType> {
        self.scopes
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
    }

    fn expr(&mut self, e: &IdedExpr) -> Result<CelType, String> {
        let t = match &e.expr {
            Expr::Literal(lit) => match lit {
                LiteralValue::Boolean(_) => CelType::Bool,
                LiteralValue::Bytes(_) => CelType::Bytes,
                LiteralValue::Double(_) => CelType::Double,
                LiteralValue::Int(_) => CelType::Int,
                LiteralValue::UInt(_) => CelType::Uint,
                LiteralValue::Null => CelType::Null,
                LiteralValue::String(_) => CelType::String,
            },
            Expr::Ident(name) => self.ident(name)?,
            Expr::Select(sel) => {
                let operand = self.expr(&sel.operand)?;
                let field = select(&operand, &sel.field)?;
                if sel.test { CelType::Bool } else { field }
            }
            Expr::Call(call) => self.call(e.id, call)?,
            Expr::List(list) => {
                let mut elem: Option<CelType> = None;
                for item in &list.elements {
                    let t = self.expr(item)?;
                    elem = Some(match elem {
                        None => t,
                        Some(prev) if prev == t => prev,
                        Some(_) => CelType::Dyn,
                    });
                }
                CelType::List(Box::new(elem.unwrap_or(CelType::Dyn)))
            }
            Expr::Map(map) => {
                let mut key: Option<CelType> = None;
                let mut value: Option<CelType> = None;
                for entry in &map.entries {
                    let EntryExpr::MapEntry(me) = &entry.expr else {
                        return Err("unsupported map entry".into());
                    };
                    let k = self.expr(&me.key)?;
                    let v = self.expr(&me.value)?;
                    key = Some(join(key, k));
                    value = Some(join(value, v));
                }
                CelType::Map(
                    Box::new(key.unwrap_or(CelType::Dyn)),
                    Box::new(value.unwrap_or(CelType::Dyn)),
                )
            }
            Expr::Comprehension(comp) => {
                let range = self.expr(&comp.iter_range)?;
                let init = self.expr(&comp.accu_init)?;
                let (var_t, var2_t) = match (&range, &comp.iter_var2) {
                    (CelType::List(elem), None) => ((**elem).clone(), None),
                    (CelType::Map(k, _), None) => ((**k).clone(), None),
                    (CelType::List(elem), Some(_)) => (CelType::Int, Some((**elem).clone())),
                    (CelType::Map(k, v), Some(_)) => ((**k).clone(), Some((**v).clone())),
                    (CelType::Dyn, _) => {
                        (CelType::Dyn, comp.iter_var2.as_ref().map(|_| CelType::Dyn))
                    }
                    (other, _) => {
                        return Err(format!(
                            "expression of type '{other}' cannot be range of a comprehension \
                             (must be list, map, or dynamic)"
                        ));
                    }
                };
                self.scopes.push((comp.accu_var.clone(), init.clone()));
                self.scopes.push((comp.iter_var.clone(), var_t));
                if let (Some(v2), Some(t2)) = (&comp.iter_var2, var2_t) {
                    self.scopes.push((v2.clone(), t2));
                }
                let cond = self.expr(&comp.loop_cond);
                let step = self.expr(&comp.loop_step);
                if comp.iter_var2.is_some() {
                    self.scopes.pop();
                }
                self.scopes.pop();
                cond?;
                let step = step?;
                // An empty list or map literal as the accumulator takes its element type from
                // the step (`map`, `filter`).
                let accu = match (&init, &step) {
                    (CelType::List(e), CelType::List(_)) if **e == CelType::Dyn => step,
                    (CelType::Map(..), CelType::Map(..)) => step,
                    _ => init,
                };
                if let Some(last) = self.scopes.last_mut() {
                    last.1 = accu;
                }
                let result = self.expr(&comp.result);
                self.scopes.pop();
                result?
            }
            Expr::Struct(_) => return Err("object construction is not supported here".into()),
            Expr::Unspecified => return Err("empty expression".into()),
        };
        Ok(self.set(e.id, t))
    }

    fn ident(&self, name: &str) -> Result<CelType, String> {
        if let Some(t) = self.local(name) {
            return Ok(t);
        }
        match name {
            "self" | "oldSelf" => Ok(self.root.clone()),
            _ => type_identifier(name)
                .map(|t| CelType::Type(Box::new(t)))
                .ok_or_else(|| format!("undeclared reference to '{name}' (in container '')")),
        }
    }

    fn call(&mut self, id: u64, call: &cel::common::ast::CallExpr) -> Result<CelType, String> {
        let name = call.func_name.as_str();
        let table = functions();
        // `a.b(x)` where `a` is not a variable may be the qualified global `a.b`.
        if let Some(target) = &call.target
            && let Expr::Ident(prefix) = &target.expr
            && self.local(prefix).is_none()
            && !matches!(prefix.as_str(), "self" | "oldSelf")
        {
            let qualified = format!("{prefix}.{name}");
            if let Some((key, overloads)) = table.get_key_value(qualified.as_str()) {
                let args = call
                    .args
                    .iter()
                    .map(|a| self.expr(a))
                    .collect::<Result<Vec<_>, _>>()?;
                self.out.qualified.insert(id, key);
                return self.resolve(id, key, overloads, None, &args);
            }
        }
        let target = match &call.target {
            Some(t) => Some(self.expr(t)?),
            None => None,
        };
        let args = call
            .args
            .iter()
            .map(|a| self.expr(a))
            .collect::<Result<Vec<_>, _>>()?;
        let Some(overloads) = table.get(name) else {
            return Err(format!(
                "undeclared reference to '{name}' (in container '')"
            ));
        };
        self.resolve(id, name, overloads, target, &args)
    }

    fn resolve(
        &mut self,
        id: u64,
        name: &str,
        overloads: &[Overload],
        target: Option<CelType>,
        args: &[CelType],
    ) -> Result<CelType, String> {
        let member = target.is_some();
        let mut actual: Vec<CelType> = target.iter().cloned().collect();
        actual.extend(args.iter().cloned());
        let mut ids = Vec::new();
        let mut result: Option<CelType> = None;
        for o in overloads {
            if o.member != member || o.params.len() != actual.len() {
                continue;
            }
            let mut subst = BTreeMap::new();
            if o.params
                .iter()
                .zip(&actual)
                .all(|(p, t)| assignable(p, t, &mut subst))
            {
                ids.push(o.id);
                let r = substitute(&o.result, &subst);
                result = Some(match result {
                    None => r,
                    Some(prev) if prev == r => prev,
                    Some(_) => CelType::Dyn,
                });
            }
        }
        match result {
            Some(r) => {
                self.out.overloads.insert(id, ids);
                Ok(r)
            }
            None => {
                let list = args
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ");
                let sig = match &target {
                    Some(t) => format!("{t}.({list})"),
                    None => format!("({list})"),
                };
                Err(format!(
                    "found no matching overload for '{}' applied to '{sig}'",
                    display_name(name)
                ))
            }
        }
    }
}

/// Operators are shown as cel-go shows them in messages (`_==_`), functions by name.
fn display_name(name: &str) -> &str {
    name
}

fn join(prev: Option<CelType>, t: CelType) -> CelType {
    match prev {
        None => t,
        Some(p) if p == t => p,
        Some(_) => CelType::Dyn,
    }
}

/// The type of `operand.field`.
fn select(operand: &CelType, field: &str) -> Result<CelType, String> {
    match operand {
        CelType::Object(decl) => match &decl.shape {
            Shape::Object(fields) => fields
                .get(field)
                .map(|f| f.cel_type())
                .ok_or_else(|| format!("undefined field '{field}'")),
            _ => Err(format!("undefined field '{field}'")),
        },
        CelType::Map(_, v) => Ok((**v).clone()),
        CelType::Dyn => Ok(CelType::Dyn),
        other => Err(format!("type '{other}' does not support field selection")),
    }
}

/// Whether an argument of type `arg` may be passed for a parameter of type `param`, binding
/// type parameters in `subst`. `dyn` fits anything; a concrete type replaces a parameter bound
/// only to `dyn`.
fn assignable(param: &CelType, arg: &CelType, subst: &mut BTreeMap<&'static str, CelType>) -> bool {
    match (param, arg) {
        (CelType::Dyn, _) | (_, CelType::Dyn) => {
            if let (CelType::Param(p), CelType::Dyn) = (param, arg) {
                subst.entry(*p).or_insert(CelType::Dyn);
            }
            true
        }
        (CelType::Param(p), _) => match subst.get(p).cloned() {
            None | Some(CelType::Dyn) => {
                subst.insert(p, arg.clone());
                true
            }
            Some(bound) => {
                let mut inner = BTreeMap::new();
                assignable(&bound, arg, &mut inner) || assignable(arg, &bound, &mut inner)
            }
        },
        (CelType::List(p), CelType::List(a)) => assignable(p, a, subst),
        (CelType::Map(pk, pv), CelType::Map(ak, av)) => {
            assignable(pk, ak, subst) && assignable(pv, av, subst)
        }
        (CelType::Type(p), CelType::Type(a)) => assignable(p, a, subst),
        (CelType::Object(p), CelType::Object(a)) => Arc::ptr_eq(p, a) || p.name == a.name,
        (p, a) => p == a,
    }
}

fn substitute(t: &CelType, subst: &BTreeMap<&'static str, CelType>) -> CelType {
    match t {
        CelType::Param(p) => subst.get(p).cloned().unwrap_or(CelType::Dyn),
        CelType::List(e) => CelType::List(Box::new(substitute(e, subst))),
        CelType::Map(k, v) => CelType::Map(
            Box::new(substitute(k, subst)),
            Box::new(substitute(v, subst)),
        ),
        CelType::Type(e) => CelType::Type(Box::new(substitute(e, subst))),
        other => other.clone(),
    }
}
