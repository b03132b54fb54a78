//! CEL types as the checker sees them, and the declared types of schema nodes (`DeclType`) with
//! the size model the API server's cost estimator uses.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A CEL type.
#[derive(Clone, Debug, PartialEq)]
pub enum CelType {
    /// Any value; checked at run time.
    Dyn,
    /// `null`.
    Null,
    /// `bool`.
    Bool,
    /// `int`.
    Int,
    /// `uint`.
    Uint,
    /// `double`.
    Double,
    /// `string`.
    String,
    /// `bytes`.
    Bytes,
    /// `google.protobuf.Duration`.
    Duration,
    /// `google.protobuf.Timestamp`.
    Timestamp,
    /// `list(T)`.
    List(Box<CelType>),
    /// `map(K, V)`.
    Map(Box<CelType>, Box<CelType>),
    /// An object of a schema (a struct with fields).
    Object(Arc<DeclType>),
    /// A library type such as `kubernetes.Quantity` or `net.IP`, by name.
    Named(&'static str),
    /// `type(T)`: the value of a type identifier such as `string`.
    Type(Box<CelType>),
    /// A type parameter in an overload signature.
    Param(&'static str),
}

/// The kind of a type, as the cost estimator distinguishes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A list.
    List,
    /// A map.
    Map,
    /// An object (struct).
    Struct,
    /// A type parameter.
    Param,
    /// Anything else.
    Other,
}

impl CelType {
    /// The kind, for the estimator's select and iteration rules.
    pub fn kind(&self) -> Kind {
        match self {
            Self::List(_) => Kind::List,
            Self::Map(..) => Kind::Map,
            // Library types with fields (Quantity, URL, ...) are structs to cel-go too.
            Self::Object(_) | Self::Named(_) => Kind::Struct,
            Self::Param(_) => Kind::Param,
            _ => Kind::Other,
        }
    }

    /// Whether values of this type have a size known to be fixed (cel-go's `isScalar`).
    pub fn is_scalar(&self) -> bool {
        matches!(
            self,
            Self::Bool | Self::Double | Self::Duration | Self::Int | Self::Timestamp | Self::Uint
        )
    }
}

impl fmt::Display for CelType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Dyn => f.write_str("dyn"),
            Self::Null => f.write_str("null"),
            Self::Bool => f.write_str("bool"),
            Self::Int => f.write_str("int"),
            Self::Uint => f.write_str("uint"),
            Self::Double => f.write_str("double"),
            Self::String => f.write_str("string"),
            Self::Bytes => f.write_str("bytes"),
            Self::Duration => f.write_str("google.protobuf.Duration"),
            Self::Timestamp => f.write_str("google.protobuf.Timestamp"),
            Self::List(e) => write!(f, "list({e})"),
            Self::Map(k, v) => write!(f, "map({k}, {v})"),
            Self::Object(d) => f.write_str(&d.name),
            Self::Named(n) => f.write_str(n),
            Self::Type(t) => write!(f, "type({t})"),
            Self::Param(p) => f.write_str(p),
        }
    }
}

/// The declared type of a schema node, with the bounds the cost estimator reads.
#[derive(Debug, PartialEq)]
pub struct DeclType {
    /// A name for messages (`self`, `self.spec`, `self.spec.tasks.@idx`, ...).
    pub name: String,
    /// What the node is.
    pub shape: Shape,
    /// The most elements (list items, map entries, string bytes) the node can hold.
    pub max_elements: i64,
    /// The smallest the node serializes to, in bytes.
    pub min_serialized_size: i64,
}

/// The structure of a declared type.
#[derive(Debug, PartialEq)]
pub enum Shape {
    /// A scalar of the given CEL type (also `dyn` for int-or-string).
    Scalar(CelType),
    /// `list(elem)`.
    List(Arc<DeclType>),
    /// `map(string, value)`.
    Map(Arc<DeclType>),
    /// An object with its exposed fields (escaped names).
    Object(BTreeMap<String, Arc<DeclType>>),
}

impl DeclType {
    /// The CEL type of values of this node.
    pub fn cel_type(self: &Arc<Self>) -> CelType {
        match &self.shape {
            Shape::Scalar(t) => t.clone(),
            Shape::List(e) => CelType::List(Box::new(e.cel_type())),
            Shape::Map(v) => CelType::Map(Box::new(CelType::String), Box::new(v.cel_type())),
            Shape::Object(_) => CelType::Object(Arc::clone(self)),
        }
    }
}

/// The map key type the API server shares between all maps: a string whose size bound is 0.
pub fn map_key() -> Arc<DeclType> {
    Arc::new(DeclType {
        name: "string".into(),
        shape: Shape::Scalar(CelType::String),
        max_elements: 0,
        min_serialized_size: 2,
    })
}
