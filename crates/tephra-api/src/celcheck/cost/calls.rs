//! What each function call costs: cel-go's built-in functions and extensions
//! (`checker/cost.go`), then Kubernetes' library (`EstimateCallCost` in the apiserver's
//! `pkg/cel/library/cost.go`). The walk over the expression is in the parent module.

use super::*;

impl Coster<'_> {
    /// The entry sizes of a value that is either of (or both of) two others: each bound is the
    /// union of theirs. Nothing is recorded unless both are known.
    fn merge_entries(&mut self, id: u64, a: &IdedExpr, b: &IdedExpr) {
        if let (Some(a), Some(b)) = (self.entry(a), self.entry(b)) {
            self.entries.insert(
                id,
                EntrySize {
                    container: a.container,
                    key: a.key.union(b.key),
                    val: a.val.union(b.val),
                },
            );
        }
    }

    pub(super) fn function_cost(
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
                self.merge_entries(e.id, args[1].expr, args[2].expr);
                let c = arg_costs[0].add(arg_costs[1].union(arg_costs[2]));
                return (c, Some(size));
            }
            "add_string" | "add_bytes" | "add_list" if args.len() == 2 => {
                let size = sz(&args[0]).add(sz(&args[1]));
                self.merge_entries(e.id, args[0].expr, args[1].expr);
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
    pub(super) fn kubernetes_call_cost(
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
