//! Dynamic MIG as Volcano's vGPU mode has it: a GPU registered in `mig` mode is cut into MIG
//! instances on demand, following one of the geometries its model allows (a geometry is a
//! named group of instance kinds, each with its memory and how many it makes). The geometries
//! come from the device configuration (`nvidia.knownMigGeometries` of the
//! `device-config.yaml` key of Volcano's `volcano-vgpu-device-config` ConfigMap), matched to a
//! GPU by a model name its type contains. The first pod on a GPU fixes its group; an instance
//! is named on the pod as `<gpu uuid>[<group>-<position>]`, the position counting the group's
//! instances in order. A `mig`-mode GPU whose model no geometry names is shared as any other
//! (HAMi-core), as Volcano falls back.

use serde::Deserialize;

/// One kind of MIG instance in a geometry.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Deserialize)]
pub struct MigInstance {
    /// Its profile name (`1g.10gb`).
    pub name: String,
    /// Its memory, in MiB.
    pub memory: u64,
    /// How many the geometry makes.
    pub count: u32,
}

/// One way of cutting a GPU.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Deserialize)]
pub struct MigGeometry {
    /// Its name (`group1`).
    pub group: String,
    /// The instances it makes, in order (positions count them in this order).
    #[serde(rename = "geometries", default)]
    pub instances: Vec<MigInstance>,
}

/// The geometries some GPU models allow.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Deserialize)]
pub struct AllowedGeometries {
    /// Model names, each matched as a part of a GPU's type.
    #[serde(default)]
    pub models: Vec<String>,
    /// The geometries, in the order they are tried.
    #[serde(rename = "allowedGeometries", default)]
    pub geometries: Vec<MigGeometry>,
}

/// Every model's geometries: the device configuration's `nvidia.knownMigGeometries`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct KnownGeometries(pub Vec<AllowedGeometries>);

#[derive(Deserialize)]
struct DeviceConfig {
    #[serde(default)]
    nvidia: NvidiaConfig,
}

#[derive(Default, Deserialize)]
struct NvidiaConfig {
    #[serde(rename = "knownMigGeometries", default)]
    known: Vec<AllowedGeometries>,
}

/// Why a device configuration cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("device-config.yaml: {0}")]
pub struct DeviceConfigError(String);

impl KnownGeometries {
    /// The geometries of the device configuration `text` (`device-config.yaml`; its other
    /// fields are Volcano's and left alone).
    pub fn parse(text: &str) -> Result<Self, DeviceConfigError> {
        let c: DeviceConfig =
            serde_saphyr::from_str(text).map_err(|e| DeviceConfigError(e.to_string()))?;
        for a in &c.nvidia.known {
            for g in &a.geometries {
                if g.instances.iter().any(|i| i.count == 0 || i.memory == 0) {
                    return Err(DeviceConfigError(format!(
                        "nvidia.knownMigGeometries: group {}: an instance with no count or memory",
                        g.group
                    )));
                }
            }
        }
        Ok(Self(c.nvidia.known))
    }

    /// The geometries a GPU of type `model` allows: those of the first entry one of whose
    /// model names its type contains.
    pub fn of(&self, model: &str) -> Option<&[MigGeometry]> {
        self.0
            .iter()
            .find(|a| {
                a.models
                    .iter()
                    .any(|m| !m.is_empty() && model.contains(m.as_str()))
            })
            .map(|a| a.geometries.as_slice())
            .filter(|g| !g.is_empty())
    }
}

impl MigGeometry {
    /// The instance kind at `position`, and its index among that kind's instances.
    pub fn at(&self, position: u32) -> Option<(&MigInstance, u32)> {
        let mut before = 0;
        for i in &self.instances {
            if position < before + i.count {
                return Some((i, position - before));
            }
            before += i.count;
        }
        None
    }

    /// The first free position (none of `used`) of the smallest instance with at least
    /// `memory` MiB, with that instance.
    pub fn pick(&self, memory: u64, used: &[u32]) -> Option<(u32, &MigInstance)> {
        let mut kinds: Vec<(u32, &MigInstance)> = Vec::new();
        let mut start = 0;
        for i in &self.instances {
            kinds.push((start, i));
            start += i.count;
        }
        kinds.sort_by_key(|(_, i)| i.memory);
        kinds
            .into_iter()
            .filter(|(_, i)| i.memory >= memory)
            .find_map(|(start, i)| {
                (start..start + i.count)
                    .find(|p| !used.contains(p))
                    .map(|p| (p, i))
            })
    }
}

/// The pod annotation value (`volcano.sh/vgpu-mode`) of dynamic MIG.
pub const MODE: &str = "mig";

/// The instance a container of `memory` MiB takes on a GPU of `geometries` whose instances
/// `in_use` (group, position) are taken: within the group in use, or (none in use) in the
/// first geometry that has one; (group, position, the instance's MiB). Unlike Volcano, which
/// looks only at instance kinds already in use once a group is, any free instance of the group
/// counts.
pub fn pick(
    geometries: &[MigGeometry],
    in_use: &[(String, u32)],
    memory: u64,
) -> Option<(String, u32, u64)> {
    match in_use.first() {
        Some((group, _)) => {
            let g = geometries.iter().find(|g| &g.group == group)?;
            let used: Vec<u32> = in_use
                .iter()
                .filter(|(x, _)| x == group)
                .map(|(_, p)| *p)
                .collect();
            g.pick(memory, &used)
                .map(|(p, i)| (g.group.clone(), p, i.memory))
        }
        None => geometries.iter().find_map(|g| {
            g.pick(memory, &[])
                .map(|(p, i)| (g.group.clone(), p, i.memory))
        }),
    }
}

/// The name of the instance at `position` of `group` on GPU `uuid`.
pub fn instance_id(uuid: &str, group: &str, position: u32) -> String {
    format!("{uuid}[{group}-{position}]")
}

/// The GPU, group and position of an instance's name; `None` for a GPU's own UUID.
pub fn parse_instance_id(id: &str) -> Option<(&str, &str, u32)> {
    let (uuid, rest) = id.split_once('[')?;
    let inner = rest.strip_suffix(']')?;
    let (group, position) = inner.rsplit_once('-')?;
    Some((uuid, group, position.parse().ok()?))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// An A30's geometry, then the A100 80GB's.
    const A100: &str = "nvidia:
  deviceSplitCount: 10
  knownMigGeometries:
  - models: [A30]
    allowedGeometries: [{group: group1, geometries: [{name: 1g.6gb, memory: 6144, count: 4}]}]
  - models: [A100-SXM4-80GB, A100-PCIE-80GB]
    allowedGeometries:
      - {group: group1, geometries: [{name: 1g.10gb, memory: 10240, count: 7}]}
      - group: group2
        geometries:
        - {name: 2g.20gb, memory: 20480, count: 3}
        - {name: 1g.10gb, memory: 10240, count: 1}
      - {group: group4, geometries: [{name: 7g.80gb, memory: 81920, count: 1}]}
";

    #[test]
    fn volcanos_device_config_reads_into_geometries_matched_by_model() {
        let k = KnownGeometries::parse(A100).unwrap();
        let g = k.of("NVIDIA-A100-SXM4-80GB").unwrap();
        assert_eq!(g.len(), 3);
        assert_eq!(g[1].instances[1].name, "1g.10gb");
        assert!(k.of("NVIDIA-Tesla T4").is_none());
        assert_eq!(k.of("NVIDIA A30").unwrap()[0].instances[0].count, 4);
        // Without geometries (or without the nvidia part) there are none.
        assert!(KnownGeometries::parse("nvidia: {}").unwrap().0.is_empty());
        assert!(KnownGeometries::parse("vnpus: []").unwrap().0.is_empty());
        let bad = "nvidia:\n  knownMigGeometries:\n  - models: [x]\n    allowedGeometries:\n    - group: g\n      geometries: [{name: a, memory: 0, count: 1}]\n";
        let e = KnownGeometries::parse(bad).unwrap_err();
        assert!(e.to_string().contains("group g"), "{e}");
        assert!(KnownGeometries::parse("nvidia: [").is_err());
    }

    #[test]
    fn positions_count_a_groups_instances_in_order_and_the_smallest_that_holds_is_picked() {
        let k = KnownGeometries::parse(A100).unwrap();
        let group2 = &k.of("A100-PCIE-80GB").unwrap()[1];
        // 8000 MiB: the 1g.10gb, at position 3 (after the three 2g.20gb).
        let (p, i) = group2.pick(8000, &[]).unwrap();
        assert_eq!((p, i.name.as_str()), (3, "1g.10gb"));
        assert_eq!(group2.at(3).unwrap().0.name, "1g.10gb");
        assert_eq!(group2.at(1).unwrap(), (&group2.instances[0], 1));
        assert!(group2.at(4).is_none());
        // The 1g.10gb taken: the next smallest, a 2g.20gb.
        let (p, i) = group2.pick(8000, &[3]).unwrap();
        assert_eq!((p, i.name.as_str()), (0, "2g.20gb"));
        assert!(group2.pick(30000, &[]).is_none());
        assert!(group2.pick(1, &[0, 1, 2, 3]).is_none());
        let id = instance_id("GPU-a", "group2", 3);
        assert_eq!(id, "GPU-a[group2-3]");
        assert_eq!(parse_instance_id(&id), Some(("GPU-a", "group2", 3)));
        assert_eq!(parse_instance_id("GPU-a"), None);
        assert_eq!(parse_instance_id("GPU-a[x]"), None);
    }
}
