//! The functions of the CRD validation environment of Kubernetes 1.34 for new rules (its 1.33
//! compatibility set): CEL's standard library, the Kubernetes libraries (quantity, lists, regex,
//! URLs, IP, CIDR) and the cel-go `strings` (v2) and `sets` extensions, each overload declared
//! exactly as the API server declares it: global or member, with its overload id, since the
//! cost estimator keys on those ids.
//!
//! What is left out (semver, format, authz, optional types, two-variable comprehensions) is not
//! used by tephra's rules; a rule calling it is refused as undeclared, which errs on the safe
//! side.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::types::CelType;

/// One overload of a function.
#[derive(Clone, Debug)]
pub struct Overload {
    /// The overload id (cel-go's and Kubernetes' names).
    pub id: &'static str,
    /// Called as `target.f(args)` rather than `f(target, args)`.
    pub member: bool,
    /// Parameter types; for a member overload the first is the receiver.
    pub params: Vec<CelType>,
    /// Result type.
    pub result: CelType,
}

fn a() -> CelType {
    CelType::Param("A")
}
fn b() -> CelType {
    CelType::Param("B")
}
fn list(t: CelType) -> CelType {
    CelType::List(Box::new(t))
}
fn map(k: CelType, v: CelType) -> CelType {
    CelType::Map(Box::new(k), Box::new(v))
}

const QUANTITY: CelType = CelType::Named("kubernetes.Quantity");
const URL: CelType = CelType::Named("kubernetes.URL");
const IP: CelType = CelType::Named("net.IP");
const CIDR: CelType = CelType::Named("net.CIDR");

struct Table(HashMap<&'static str, Vec<Overload>>);

impl Table {
    fn global(&mut self, f: &'static str, id: &'static str, params: Vec<CelType>, r: CelType) {
        self.add(f, id, false, params, r);
    }
    fn member(&mut self, f: &'static str, id: &'static str, params: Vec<CelType>, r: CelType) {
        self.add(f, id, true, params, r);
    }
    fn add(
        &mut self,
        f: &'static str,
        id: &'static str,
        member: bool,
        params: Vec<CelType>,
        r: CelType,
    ) {
        self.0.entry(f).or_default().push(Overload {
            id,
            member,
            params,
            result: r,
        });
    }
}

/// The overloads of every declared function, by function name.
pub fn functions() -> &'static HashMap<&'static str, Vec<Overload>> {
    static TABLE: OnceLock<HashMap<&'static str, Vec<Overload>>> = OnceLock::new();
    TABLE.get_or_init(build)
}

fn build() -> HashMap<&'static str, Vec<Overload>> {
    use CelType::{Bool, Bytes, Double, Duration, Dyn, Int, String as Str, Timestamp, Uint};
    let mut t = Table(HashMap::new());

    // Logic.
    t.global("_&&_", "logical_and", vec![Bool, Bool], Bool);
    t.global("_||_", "logical_or", vec![Bool, Bool], Bool);
    t.global("!_", "logical_not", vec![Bool], Bool);
    t.global(
        "@not_strictly_false",
        "not_strictly_false",
        vec![Bool],
        Bool,
    );
    t.global("_?_:_", "conditional", vec![Bool, a(), a()], a());
    t.global("_==_", "equals", vec![a(), a()], Bool);
    t.global("_!=_", "not_equals", vec![a(), a()], Bool);

    // Ordering, including the cross-type numeric comparisons the environment enables.
    let numeric = [(Int, "int64"), (Uint, "uint64"), (Double, "double")];
    for (op, name) in [
        ("_<_", "less"),
        ("_<=_", "less_equals"),
        ("_>_", "greater"),
        ("_>=_", "greater_equals"),
    ] {
        for (ty, suffix) in [
            (Bool, "bool"),
            (Int, "int64"),
            (Uint, "uint64"),
            (Double, "double"),
            (Str, "string"),
            (Bytes, "bytes"),
            (Timestamp, "timestamp"),
            (Duration, "duration"),
        ] {
            t.global(
                op,
                leak(format!("{name}_{suffix}")),
                vec![ty.clone(), ty],
                Bool,
            );
        }
        for (l, ls) in &numeric {
            for (r, rs) in &numeric {
                if ls != rs {
                    t.global(
                        op,
                        leak(format!("{name}_{ls}_{rs}")),
                        vec![l.clone(), r.clone()],
                        Bool,
                    );
                }
            }
        }
    }

    // Arithmetic.
    for (ty, s) in &numeric {
        for (op, name) in [
            ("_+_", "add"),
            ("_-_", "subtract"),
            ("_*_", "multiply"),
            ("_/_", "divide"),
        ] {
            t.global(
                op,
                leak(format!("{name}_{s}")),
                vec![ty.clone(), ty.clone()],
                ty.clone(),
            );
        }
    }
    t.global("_%_", "modulo_int64", vec![Int, Int], Int);
    t.global("_%_", "modulo_uint64", vec![Uint, Uint], Uint);
    t.global("-_", "negate_int64", vec![Int], Int);
    t.global("-_", "negate_double", vec![Double], Double);
    t.global("_+_", "add_string", vec![Str, Str], Str);
    t.global("_+_", "add_bytes", vec![Bytes, Bytes], Bytes);
    t.global("_+_", "add_list", vec![list(a()), list(a())], list(a()));
    t.global(
        "_+_",
        "add_timestamp_duration",
        vec![Timestamp, Duration],
        Timestamp,
    );
    t.global(
        "_+_",
        "add_duration_timestamp",
        vec![Duration, Timestamp],
        Timestamp,
    );
    t.global(
        "_+_",
        "add_duration_duration",
        vec![Duration, Duration],
        Duration,
    );
    t.global(
        "_-_",
        "subtract_timestamp_timestamp",
        vec![Timestamp, Timestamp],
        Duration,
    );
    t.global(
        "_-_",
        "subtract_timestamp_duration",
        vec![Timestamp, Duration],
        Timestamp,
    );
    t.global(
        "_-_",
        "subtract_duration_duration",
        vec![Duration, Duration],
        Duration,
    );

    // Containers.
    t.global("_[_]", "index_list", vec![list(a()), Int], a());
    t.global("_[_]", "index_map", vec![map(a(), b()), a()], b());
    t.global("@in", "in_list", vec![a(), list(a())], Bool);
    t.global("@in", "in_map", vec![a(), map(a(), b())], Bool);
    t.global("size", "size_string", vec![Str], Int);
    t.global("size", "size_bytes", vec![Bytes], Int);
    t.global("size", "size_list", vec![list(a())], Int);
    t.global("size", "size_map", vec![map(a(), b())], Int);
    t.member("size", "string_size", vec![Str], Int);
    t.member("size", "bytes_size", vec![Bytes], Int);
    t.member("size", "list_size", vec![list(a())], Int);
    t.member("size", "map_size", vec![map(a(), b())], Int);

    // Conversions.
    for (id, from) in [
        ("string_to_string", Str),
        ("bool_to_string", Bool),
        ("bytes_to_string", Bytes),
        ("double_to_string", Double),
        ("duration_to_string", Duration),
        ("int64_to_string", Int),
        ("timestamp_to_string", Timestamp),
        ("uint64_to_string", Uint),
        ("ip_to_string", IP),
        ("cidr_to_string", CIDR),
    ] {
        t.global("string", id, vec![from], Str);
    }
    for (id, from) in [
        ("int64_to_int64", Int),
        ("uint64_to_int64", Uint),
        ("double_to_int64", Double),
        ("string_to_int64", Str),
        ("timestamp_to_int64", Timestamp),
        ("duration_to_int64", Duration),
    ] {
        t.global("int", id, vec![from], Int);
    }
    for (id, from) in [
        ("uint64_to_uint64", Uint),
        ("int64_to_uint64", Int),
        ("double_to_uint64", Double),
        ("string_to_uint64", Str),
    ] {
        t.global("uint", id, vec![from], Uint);
    }
    for (id, from) in [
        ("double_to_double", Double),
        ("int64_to_double", Int),
        ("uint64_to_double", Uint),
        ("string_to_double", Str),
    ] {
        t.global("double", id, vec![from], Double);
    }
    t.global("bool", "bool_to_bool", vec![Bool], Bool);
    t.global("bool", "string_to_bool", vec![Str], Bool);
    t.global("bytes", "bytes_to_bytes", vec![Bytes], Bytes);
    t.global("bytes", "string_to_bytes", vec![Str], Bytes);
    t.global("duration", "duration_to_duration", vec![Duration], Duration);
    t.global("duration", "string_to_duration", vec![Str], Duration);
    t.global(
        "timestamp",
        "timestamp_to_timestamp",
        vec![Timestamp],
        Timestamp,
    );
    t.global("timestamp", "string_to_timestamp", vec![Str], Timestamp);
    t.global("timestamp", "int64_to_timestamp", vec![Int], Timestamp);
    t.global("dyn", "to_dyn", vec![a()], Dyn);

    // Strings (standard).
    t.member("contains", "contains_string", vec![Str, Str], Bool);
    t.member("startsWith", "starts_with_string", vec![Str, Str], Bool);
    t.member("endsWith", "ends_with_string", vec![Str, Str], Bool);
    t.global("matches", "matches", vec![Str, Str], Bool);
    t.member("matches", "matches_string", vec![Str, Str], Bool);

    // cel-go strings extension, version 2.
    t.member("charAt", "string_char_at_int", vec![Str, Int], Str);
    t.member("indexOf", "string_index_of_string", vec![Str, Str], Int);
    t.member(
        "indexOf",
        "string_index_of_string_int",
        vec![Str, Str, Int],
        Int,
    );
    t.member(
        "lastIndexOf",
        "string_last_index_of_string",
        vec![Str, Str],
        Int,
    );
    t.member(
        "lastIndexOf",
        "string_last_index_of_string_int",
        vec![Str, Str, Int],
        Int,
    );
    t.member("lowerAscii", "string_lower_ascii", vec![Str], Str);
    t.member("upperAscii", "string_upper_ascii", vec![Str], Str);
    t.member("trim", "string_trim", vec![Str], Str);
    t.member(
        "replace",
        "string_replace_string_string",
        vec![Str, Str, Str],
        Str,
    );
    t.member(
        "replace",
        "string_replace_string_string_int",
        vec![Str, Str, Str, Int],
        Str,
    );
    t.member("split", "string_split_string", vec![Str, Str], list(Str));
    t.member(
        "split",
        "string_split_string_int",
        vec![Str, Str, Int],
        list(Str),
    );
    t.member("substring", "string_substring_int", vec![Str, Int], Str);
    t.member(
        "substring",
        "string_substring_int_int",
        vec![Str, Int, Int],
        Str,
    );
    t.member("format", "string_format", vec![Str, list(Dyn)], Str);
    t.global("strings.quote", "strings_quote", vec![Str], Str);
    t.member("join", "list_join", vec![list(Str)], Str);
    t.member("join", "list_join_string", vec![list(Str), Str], Str);

    // cel-go sets extension.
    for (f, id) in [
        ("sets.contains", "list_sets_contains_list"),
        ("sets.equivalent", "list_sets_equivalent_list"),
        ("sets.intersects", "list_sets_intersects_list"),
    ] {
        t.global(f, id, vec![list(a()), list(a())], Bool);
    }

    // Kubernetes lists library.
    for (ty, s) in [
        (Int, "int"),
        (Uint, "uint"),
        (Double, "double"),
        (Bool, "bool"),
        (Duration, "duration"),
        (Timestamp, "timestamp"),
        (Str, "string"),
        (Bytes, "bytes"),
    ] {
        t.member(
            "isSorted",
            leak(format!("list_{s}_is_sorted_bool")),
            vec![list(ty.clone())],
            Bool,
        );
        t.member(
            "max",
            leak(format!("list_{s}_max_{s}")),
            vec![list(ty.clone())],
            ty.clone(),
        );
        t.member(
            "min",
            leak(format!("list_{s}_min_{s}")),
            vec![list(ty.clone())],
            ty.clone(),
        );
        if matches!(s, "int" | "uint" | "double" | "duration") {
            t.member(
                "sum",
                leak(format!("list_{s}_sum_{s}")),
                vec![list(ty.clone())],
                ty,
            );
        }
    }
    t.member("indexOf", "list_a_index_of_int", vec![list(a()), a()], Int);
    t.member(
        "lastIndexOf",
        "list_a_last_index_of_int",
        vec![list(a()), a()],
        Int,
    );

    // Kubernetes regex library.
    t.member("find", "string_find_string", vec![Str, Str], Str);
    t.member(
        "findAll",
        "string_find_all_string",
        vec![Str, Str],
        list(Str),
    );
    t.member(
        "findAll",
        "string_find_all_string_int",
        vec![Str, Str, Int],
        list(Str),
    );

    // Kubernetes quantity library. `sign` is declared global only: `sign(quantity(x))`.
    t.global("quantity", "string_to_quantity", vec![Str], QUANTITY);
    t.global("isQuantity", "is_quantity_string", vec![Str], Bool);
    t.global("sign", "quantity_sign", vec![QUANTITY], Int);
    t.member(
        "isGreaterThan",
        "quantity_is_greater_than",
        vec![QUANTITY, QUANTITY],
        Bool,
    );
    t.member(
        "isLessThan",
        "quantity_is_less_than",
        vec![QUANTITY, QUANTITY],
        Bool,
    );
    t.member(
        "compareTo",
        "quantity_compare_to",
        vec![QUANTITY, QUANTITY],
        Int,
    );
    t.member(
        "asApproximateFloat",
        "quantity_get_float",
        vec![QUANTITY],
        Double,
    );
    t.member("asInteger", "quantity_get_int", vec![QUANTITY], Int);
    t.member("isInteger", "quantity_is_integer", vec![QUANTITY], Bool);
    t.member("add", "quantity_add", vec![QUANTITY, QUANTITY], QUANTITY);
    t.member("add", "quantity_add_int", vec![QUANTITY, Int], QUANTITY);
    t.member("sub", "quantity_sub", vec![QUANTITY, QUANTITY], QUANTITY);
    t.member("sub", "quantity_sub_int", vec![QUANTITY, Int], QUANTITY);

    // Kubernetes URL library.
    t.global("url", "string_to_url", vec![Str], URL);
    t.global("isURL", "is_url_string", vec![Str], Bool);
    for (f, id) in [
        ("getScheme", "url_get_scheme"),
        ("getHost", "url_get_host"),
        ("getHostname", "url_get_hostname"),
        ("getPort", "url_get_port"),
        ("getEscapedPath", "url_get_escaped_path"),
    ] {
        t.member(f, id, vec![URL], Str);
    }
    t.member("getQuery", "url_get_query", vec![URL], map(Str, list(Str)));

    // Kubernetes IP and CIDR libraries.
    t.global("ip", "string_to_ip", vec![Str], IP);
    t.global("isIP", "is_ip", vec![Str], Bool);
    t.global("ip.isCanonical", "ip_is_canonical", vec![Str], Bool);
    t.member("family", "ip_family", vec![IP], Int);
    t.global("cidr", "string_to_cidr", vec![Str], CIDR);
    t.global("isCIDR", "is_cidr", vec![Str], Bool);
    t.member(
        "containsIP",
        "cidr_contains_ip_string",
        vec![CIDR, Str],
        Bool,
    );
    t.member("containsIP", "cidr_contains_ip_ip", vec![CIDR, IP], Bool);
    t.member("prefixLength", "cidr_prefix_length", vec![CIDR], Int);
    t.member("ip", "cidr_ip", vec![CIDR], IP);

    t.0
}

/// Overload ids built from parts live for the whole program, like the table that holds them.
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// Identifiers that name types (`type(x) == string`).
pub fn type_identifier(name: &str) -> Option<CelType> {
    use CelType::*;
    Some(match name {
        "bool" => Bool,
        "int" => Int,
        "uint" => Uint,
        "double" => Double,
        "string" => String,
        "bytes" => Bytes,
        "null_type" => Null,
        "list" => List(Box::new(Dyn)),
        "map" => Map(Box::new(Dyn), Box::new(Dyn)),
        "dyn" => Dyn,
        _ => return None,
    })
}
