//! Root types for kinds whose `spec` may be left out.
//!
//! Volcano accepts a Queue or a PodGroup with no `spec` at all (every field has a default), and
//! integrations and users write them that way. kube's `CustomResource` derive makes `spec`
//! required in the Rust type, so such an object could not even be read back from a cluster. For
//! these kinds the derive generates a hidden `...Crd` type that is used only to render the
//! CustomResourceDefinition, and [`optional_spec_root!`] writes the public type: the same
//! `apiVersion`/`kind`/`metadata`/`spec`/`status` shape, with a missing `spec` read as its
//! default.

/// Defines `$root` with `metadata`, a defaulted `spec: $spec` and `status: Option<$status>`,
/// taking its group, version, kind and plural from the derived `$crd` type.
macro_rules! optional_spec_root {
    ($(#[$doc:meta])* $root:ident, $crd:ty, $spec:ty, $status:ty) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $root {
            /// Standard object metadata.
            #[serde(default)]
            pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
            /// Desired state; an object written without `spec` gets the defaults.
            #[serde(default)]
            pub spec: $spec,
            /// Observed state.
            #[serde(default)]
            pub status: Option<$status>,
        }

        impl $root {
            /// A new object with the given name and spec.
            pub fn new(name: &str, spec: $spec) -> Self {
                Self {
                    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                        name: Some(name.to_string()),
                        ..Default::default()
                    },
                    spec,
                    status: None,
                }
            }
        }

        impl serde::Serialize for $root {
            fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
                use kube::core::Resource;
                use serde::ser::SerializeStruct;
                let mut obj = ser.serialize_struct(
                    stringify!($root),
                    4 + usize::from(self.status.is_some()),
                )?;
                obj.serialize_field("apiVersion", &<$crd>::api_version(&()))?;
                obj.serialize_field("kind", &<$crd>::kind(&()))?;
                obj.serialize_field("metadata", &self.metadata)?;
                obj.serialize_field("spec", &self.spec)?;
                if let Some(status) = &self.status {
                    obj.serialize_field("status", status)?;
                }
                obj.end()
            }
        }

        impl kube::core::Resource for $root {
            type DynamicType = ();
            type Scope = <$crd as kube::core::Resource>::Scope;

            fn kind(dt: &()) -> std::borrow::Cow<'_, str> {
                <$crd>::kind(dt)
            }
            fn group(dt: &()) -> std::borrow::Cow<'_, str> {
                <$crd>::group(dt)
            }
            fn version(dt: &()) -> std::borrow::Cow<'_, str> {
                <$crd>::version(dt)
            }
            fn plural(dt: &()) -> std::borrow::Cow<'_, str> {
                <$crd>::plural(dt)
            }
            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }

        impl kube::core::object::HasSpec for $root {
            type Spec = $spec;
            fn spec(&self) -> &$spec {
                &self.spec
            }
            fn spec_mut(&mut self) -> &mut $spec {
                &mut self.spec
            }
        }

        impl kube::core::object::HasStatus for $root {
            type Status = $status;
            fn status(&self) -> Option<&$status> {
                self.status.as_ref()
            }
            fn status_mut(&mut self) -> &mut Option<$status> {
                &mut self.status
            }
        }
    };
}

pub(crate) use optional_spec_root;
