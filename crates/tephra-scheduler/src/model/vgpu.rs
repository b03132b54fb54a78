//! Shared GPUs as Volcano's `deviceshare` plugin and the volcano-vgpu device plugin (HAMi-core)
//! know them: the GPUs a node registers ([`parse_register`]), what a pod asks of them
//! ([`GpuAsk`]), what it was given ([`Grants`]), and the annotation formats each travels in.
//!
//! The device plugin registers each GPU of its node in the node annotation [`REGISTER`]: one
//! record `uuid,split,memory,type,health,mode:` per GPU. A pod asks, per container, for a
//! number of GPUs ([`NUMBER`]), memory on each ([`MEMORY`] in MiB, or [`MEMORY_PERCENTAGE`] of
//! the card; the whole card when neither is given) and a share of its cores ([`CORES`], 0–100;
//! 100 takes the card alone). The scheduler writes the GPUs it chose on the pod ([`IDS`] and
//! [`TO_ALLOCATE`], `uuid,NVIDIA,memory,cores:` per GPU, containers joined by `;`), which the
//! device plugin reads when the kubelet asks it to allocate.
//!
//! Volcano's older **gpushare** mode is modelled with the same types: a node offering
//! [`SHARE_MEMORY`] (MiB in all) and [`SHARE_NUMBER`] (cards) has that many cards of equal
//! memory ([`share_gpus`], without the ids [`SHARE_UNHEALTHY`] names), known by their index
//! ([`share_uuid`]); a pod limiting [`SHARE_MEMORY`] takes that much of one card, one
//! limiting [`SHARE_NUMBER`] that many idle cards whole ([`share_ask`]); the cards given are
//! written in [`SHARE_INDEX`] with the time in [`SHARE_PREDICATE_TIME`].

use std::fmt::Write as _;

/// gpushare: the node's GPU memory in all (MiB), and what a pod limits of it.
pub const SHARE_MEMORY: &str = "volcano.sh/gpu-memory";
/// gpushare: the node's cards, and how many idle cards a pod limits.
pub const SHARE_NUMBER: &str = "volcano.sh/gpu-number";
/// gpushare pod annotation: the indices of the cards given, comma-separated.
pub const SHARE_INDEX: &str = "volcano.sh/gpu-index";
/// gpushare pod annotation: when the cards were chosen (Unix nanoseconds).
pub const SHARE_PREDICATE_TIME: &str = "volcano.sh/predicate-time";
/// gpushare node annotation: indices of unhealthy cards, comma-separated.
pub const SHARE_UNHEALTHY: &str = "volcano.sh/gpu-unhealthy-ids";
/// The type of a gpushare card (never a vGPU's, which names [`VENDOR`]).
pub const SHARE_MODEL: &str = "gpushare";
/// The prefix of a gpushare card's [`Gpu::uuid`]: its index follows.
const SHARE_PREFIX: &str = "gpushare-";

/// The [`Gpu::uuid`] of gpushare card `index`.
pub fn share_uuid(index: u32) -> String {
    format!("{SHARE_PREFIX}{index}")
}

/// The index of a gpushare card by its [`Gpu::uuid`]; `None` for a vGPU's.
pub fn share_index(uuid: &str) -> Option<u32> {
    uuid.strip_prefix(SHARE_PREFIX)?.parse().ok()
}

/// The gpushare cards of a node offering `memory` MiB over `number` cards, less those
/// `unhealthy` names (the annotation's text; ids that do not read are skipped).
pub fn share_gpus(memory: u64, number: u64, unhealthy: Option<&str>) -> Vec<Gpu> {
    let Some(per) = memory.checked_div(number) else {
        return Vec::new();
    };
    let bad: Vec<u64> = unhealthy
        .into_iter()
        .flat_map(|t| t.split(','))
        .filter_map(|i| i.trim().parse().ok())
        .collect();
    (0..number)
        .filter(|i| !bad.contains(i))
        .map(|i| Gpu {
            uuid: share_uuid(u32::try_from(i).unwrap_or(u32::MAX)),
            split: u32::MAX,
            memory: per,
            model: SHARE_MODEL.into(),
            healthy: true,
            mig: false,
        })
        .collect()
}

/// What a pod asks of gpushare cards, from its containers' limits of [`SHARE_MEMORY`] and
/// [`SHARE_NUMBER`] (`(memory, number)` per container, and the largest of its init
/// containers'), as Volcano sums them: memory of one card (the containers' sum, or an init
/// container's if larger), else that many idle cards whole; `None` when it asks neither.
pub fn share_ask(containers: &[(u64, u64)], init: (u64, u64)) -> Option<GpuAsk> {
    let memory = containers.iter().map(|c| c.0).sum::<u64>().max(init.0);
    let number = containers.iter().map(|c| c.1).sum::<u64>().max(init.1);
    let ask = if memory > 0 {
        ContainerAsk {
            index: 0,
            number: 1,
            memory,
            percent: None,
            cores: 0,
        }
    } else if number > 0 {
        ContainerAsk {
            index: 0,
            number: u32::try_from(number).unwrap_or(u32::MAX),
            memory: 0,
            percent: None,
            cores: FULL_CORES,
        }
    } else {
        return None;
    };
    Some(GpuAsk {
        containers: 1,
        asks: vec![ask],
        share: true,
        ..GpuAsk::default()
    })
}

impl Grants {
    /// The [`SHARE_INDEX`] annotation of gpushare grants: the cards' indices; `None` if a
    /// grant is not of a gpushare card.
    pub fn share_indices(&self) -> Option<String> {
        let ids: Option<Vec<String>> = self
            .all()
            .map(|g| share_index(&g.uuid).map(|i| i.to_string()))
            .collect();
        ids.filter(|v| !v.is_empty()).map(|v| v.join(","))
    }

    /// The grants a gpushare pod of `ask` holds by its [`SHARE_INDEX`] annotation.
    pub fn of_share_indices(text: &str, ask: &GpuAsk) -> Self {
        let per = ask.asks.first();
        Self(vec![
            text.split(',')
                .filter_map(|i| i.trim().parse::<u32>().ok())
                .map(|i| Grant {
                    uuid: share_uuid(i),
                    memory: per.map_or(0, |a| a.memory),
                    cores: per.map_or(0, |a| a.cores),
                })
                .collect(),
        ])
    }
}

/// Node annotation: the GPUs the device plugin registered.
pub const REGISTER: &str = "volcano.sh/node-vgpu-register";
/// Resource: GPUs per container (allocatable: GPUs × split count).
pub const NUMBER: &str = "volcano.sh/vgpu-number";
/// Resource: MiB per GPU (allocatable: the node's GPU memory).
pub const MEMORY: &str = "volcano.sh/vgpu-memory";
/// Resource: percent of each GPU's memory (wins over [`MEMORY`]).
pub const MEMORY_PERCENTAGE: &str = "volcano.sh/vgpu-memory-percentage";
/// Resource: percent of each GPU's cores.
pub const CORES: &str = "volcano.sh/vgpu-cores";
/// Pod annotation: the GPUs given, per container.
pub const IDS: &str = "volcano.sh/vgpu-ids-new";
/// Pod annotation: the GPUs the device plugin has yet to allocate (a copy of [`IDS`]).
pub const TO_ALLOCATE: &str = "volcano.sh/devices-to-allocate";
/// Pod annotation: the node the GPUs were chosen on.
pub const ASSIGNED_NODE: &str = "volcano.sh/vgpu-node";
/// Pod annotation: when they were chosen (Unix seconds); the device plugin takes the oldest.
pub const ASSIGNED_TIME: &str = "volcano.sh/vgpu-time";
/// Pod annotation: `allocating`, then `success` or `failed` from the device plugin.
pub const BIND_PHASE: &str = "volcano.sh/bind-phase";
/// Pod annotation: when the pod was bound (Unix seconds).
pub const BIND_TIME: &str = "volcano.sh/bind-time";
/// Pod annotation: `hami-core` or `mig`: the node mode the pod accepts.
pub const MODE: &str = "volcano.sh/vgpu-mode";
/// Pod annotation: GPU types the pod accepts (comma list, case-insensitive substrings).
pub const USE_TYPE: &str = "nvidia.com/use-gputype";
/// Pod annotation: GPU types the pod refuses (read only without [`USE_TYPE`]).
pub const NOUSE_TYPE: &str = "nvidia.com/nouse-gputype";
/// Pod annotation: GPU UUIDs the pod accepts (comma list, exact).
pub const USE_UUID: &str = "volcano.sh/vgpu-use-gpuuuid";
/// Pod annotation: GPU UUIDs the pod refuses (wins over [`USE_UUID`]).
pub const NOUSE_UUID: &str = "volcano.sh/vgpu-nouse-gpuuuid";
/// Pod annotation: `spread`: no two pods of one PodGroup share a GPU.
pub const GROUP_POLICY: &str = "volcano.sh/vgpu-podgroup-policy";
/// The device type a pod's GPUs are written with, and which a registered GPU's type must name.
pub const VENDOR: &str = "NVIDIA";
/// The cores of one GPU, in percent.
pub const FULL_CORES: u32 = 100;
/// Node annotation: the node lock (`deviceshare.NodeLockEnable`), the RFC 3339 time the
/// scheduler took it as it bound a vGPU pod there; the device plugin removes it once it has
/// allocated that pod's GPUs. While it stands no other vGPU pod is bound to the node.
pub const NODE_LOCK: &str = "hamivgpu";
/// Seconds after which a node lock nobody released is taken over, as Volcano's scheduler does.
pub const LOCK_EXPIRY: i64 = 300;
/// What the device plugin writes in [`BIND_PHASE`] once it has allocated a pod's GPUs.
pub const BIND_SUCCESS: &str = "success";
/// What the device plugin writes in [`BIND_PHASE`] when it could not.
pub const BIND_FAILED: &str = "failed";

/// One GPU a node registered.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Gpu {
    /// Its UUID (`GPU-...`).
    pub uuid: String,
    /// How many pods may share it (the device plugin's split count).
    pub split: u32,
    /// Its memory, in MiB (divided by the plugin's memory factor).
    pub memory: u64,
    /// Its type: `NVIDIA-` and the model.
    pub model: String,
    /// Whether the kubelet reports it healthy.
    pub healthy: bool,
    /// Whether its node runs dynamic MIG (`mig`) rather than HAMi-core slices.
    pub mig: bool,
}

/// Why a node's [`REGISTER`] annotation cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// A record has fewer fields than `uuid,split,memory,type,health,mode`.
    #[error(
        "annotation {REGISTER}: GPU {index} has {fields} fields, wants 6 (uuid,split,memory,type,health,mode)"
    )]
    Fields {
        /// The record's position.
        index: usize,
        /// How many fields it has.
        fields: usize,
    },
    /// A number does not parse.
    #[error("annotation {REGISTER}: GPU {index}: {field} {value:?} is not a number")]
    Number {
        /// The record's position.
        index: usize,
        /// Which field.
        field: &'static str,
        /// The text.
        value: String,
    },
}

/// The GPUs of a [`REGISTER`] annotation, in its order. Records without a comma are skipped, as
/// the device plugin's own reader does; a record with too few fields or a bad number refuses
/// the whole annotation.
pub fn parse_register(text: &str) -> Result<Vec<Gpu>, RegisterError> {
    let mut out = Vec::new();
    for (index, record) in text.split(':').filter(|r| r.contains(',')).enumerate() {
        let f: Vec<&str> = record.split(',').collect();
        if f.len() < 6 {
            return Err(RegisterError::Fields {
                index,
                fields: f.len(),
            });
        }
        let number = |field: &'static str, v: &str| {
            v.trim().parse::<u64>().map_err(|_| RegisterError::Number {
                index,
                field,
                value: v.to_string(),
            })
        };
        out.push(Gpu {
            uuid: f[0].trim().to_string(),
            split: u32::try_from(number("split", f[1])?).unwrap_or(u32::MAX),
            memory: number("memory", f[2])?,
            model: f[3].to_string(),
            healthy: f[4].trim().eq_ignore_ascii_case("true"),
            mig: f[5].trim() == "mig",
        });
    }
    Ok(out)
}

/// The [`REGISTER`] annotation a device plugin writes for `gpus` (for simulated nodes).
pub fn encode_register(gpus: &[Gpu]) -> String {
    let mut s = String::new();
    for g in gpus {
        let mode = if g.mig { "mig" } else { "hami-core" };
        let _ = write!(
            s,
            "{},{},{},{},{},{mode}:",
            g.uuid, g.split, g.memory, g.model, g.healthy
        );
    }
    s
}

/// What one container asks of a node's GPUs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ContainerAsk {
    /// Its position in `spec.containers`.
    pub index: u32,
    /// How many GPUs (each a different one).
    pub number: u32,
    /// MiB on each; 0 with no percentage: the whole card.
    pub memory: u64,
    /// Percent of each card's memory, which wins over `memory`.
    pub percent: Option<u32>,
    /// Percent of each card's cores.
    pub cores: u32,
}

impl ContainerAsk {
    /// The memory it takes on `gpu`.
    pub fn memory_on(&self, gpu: &Gpu) -> u64 {
        match self.percent {
            Some(p) => gpu.memory.saturating_mul(u64::from(p)) / 100,
            None if self.memory == 0 => gpu.memory,
            None => self.memory,
        }
    }
}

/// What a pod asks of a node's shared GPUs, with the annotations that choose among them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct GpuAsk {
    /// How many containers the pod has (those without GPUs get an empty entry on the pod).
    pub containers: u32,
    /// The containers that ask for GPUs, in order.
    pub asks: Vec<ContainerAsk>,
    /// [`MODE`]: the node mode it accepts.
    pub mode: Option<String>,
    /// [`USE_TYPE`], when given.
    pub use_types: Option<Vec<String>>,
    /// [`NOUSE_TYPE`].
    pub nouse_types: Vec<String>,
    /// [`USE_UUID`], when given.
    pub use_uuids: Option<Vec<String>>,
    /// [`NOUSE_UUID`].
    pub nouse_uuids: Vec<String>,
    /// [`GROUP_POLICY`] is `spread`.
    pub group_spread: bool,
    /// It asks for gpushare cards ([`share_ask`]), not vGPUs.
    pub share: bool,
}

impl GpuAsk {
    /// Whether `gpu` is one this pod may use by its type and UUID filters (and health).
    pub fn accepts(&self, gpu: &Gpu) -> bool {
        if self.share {
            return gpu.healthy && gpu.model == SHARE_MODEL;
        }
        if !gpu.healthy || !gpu.model.contains(VENDOR) {
            return false;
        }
        let model = gpu.model.to_ascii_lowercase();
        let names = |list: &[String]| {
            list.iter()
                .any(|t| model.contains(&t.trim().to_ascii_lowercase()))
        };
        match &self.use_types {
            Some(allowed) => {
                if !names(allowed) {
                    return false;
                }
            }
            None => {
                if names(&self.nouse_types) {
                    return false;
                }
            }
        }
        if self.nouse_uuids.contains(&gpu.uuid) {
            return false;
        }
        self.use_uuids
            .as_ref()
            .is_none_or(|allowed| allowed.contains(&gpu.uuid))
    }
}

/// A comma list as the annotations write it: entries trimmed, empty ones dropped.
pub fn comma_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// One GPU given to one container.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Grant {
    /// The GPU's UUID.
    pub uuid: String,
    /// MiB taken on it.
    pub memory: u64,
    /// Percent of its cores taken.
    pub cores: u32,
}

/// The GPUs given to a pod, per container in `spec.containers` order (empty for a container
/// without GPUs).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Grants(pub Vec<Vec<Grant>>);

impl Grants {
    /// Every GPU given, with the container it went to.
    pub fn all(&self) -> impl Iterator<Item = &Grant> {
        self.0.iter().flatten()
    }

    /// The [`IDS`] annotation: `uuid,NVIDIA,memory,cores:` per GPU, containers joined by `;`.
    pub fn encode(&self) -> String {
        let mut s = String::new();
        for (i, c) in self.0.iter().enumerate() {
            if i > 0 {
                s.push(';');
            }
            for g in c {
                let _ = write!(s, "{},{VENDOR},{},{}:", g.uuid, g.memory, g.cores);
            }
        }
        s
    }

    /// Reads an [`IDS`] annotation. Entries with fewer than four fields or a bad number are
    /// skipped, as the device plugin's reader skips them.
    pub fn parse(text: &str) -> Self {
        Self(
            text.split(';')
                .map(|c| {
                    c.split(':')
                        .filter_map(|d| {
                            let f: Vec<&str> = d.split(',').collect();
                            if f.len() < 4 {
                                return None;
                            }
                            Some(Grant {
                                uuid: f[0].to_string(),
                                memory: f[2].trim().parse().ok()?,
                                cores: f[3].trim().parse().ok()?,
                            })
                        })
                        .collect()
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t4(uuid: &str) -> Gpu {
        Gpu {
            uuid: uuid.into(),
            split: 10,
            memory: 15360,
            model: "NVIDIA-Tesla T4".into(),
            healthy: true,
            mig: false,
        }
    }

    #[test]
    fn the_register_annotation_round_trips_and_refuses_short_records() {
        let gpus = vec![t4("GPU-a"), t4("GPU-b")];
        let text = encode_register(&gpus);
        assert_eq!(
            text,
            "GPU-a,10,15360,NVIDIA-Tesla T4,true,hami-core:GPU-b,10,15360,NVIDIA-Tesla T4,true,hami-core:"
        );
        assert_eq!(parse_register(&text), Ok(gpus));
        assert!(matches!(
            parse_register("GPU-a,10,15360,NVIDIA-T4,true:"),
            Err(RegisterError::Fields {
                index: 0,
                fields: 5
            })
        ));
        let err = parse_register("GPU-a,ten,15360,NVIDIA-T4,true,hami-core:").unwrap_err();
        assert!(err.to_string().contains("split"), "{err}");
    }

    #[test]
    fn grants_are_written_as_the_device_plugin_reads_them() {
        let g = Grants(vec![
            vec![
                Grant {
                    uuid: "GPU-A".into(),
                    memory: 15360,
                    cores: 0,
                },
                Grant {
                    uuid: "GPU-B".into(),
                    memory: 15360,
                    cores: 0,
                },
            ],
            vec![],
            vec![Grant {
                uuid: "GPU-B".into(),
                memory: 7680,
                cores: 30,
            }],
        ]);
        let text = g.encode();
        assert_eq!(
            text,
            "GPU-A,NVIDIA,15360,0:GPU-B,NVIDIA,15360,0:;;GPU-B,NVIDIA,7680,30:"
        );
        assert_eq!(Grants::parse(&text), g);
        assert_eq!(
            Grants::parse("GPU-A,NVIDIA,x,0:GPU-B,NVIDIA,1,2").0[0].len(),
            1
        );
    }

    #[test]
    fn type_filters_match_substrings_and_the_allow_list_wins() {
        let a100 = Gpu {
            model: "NVIDIA-NVIDIA A100-PCIE-40GB".into(),
            ..t4("GPU-1")
        };
        let ask = |use_types: Option<&str>, nouse: &str| GpuAsk {
            use_types: use_types.map(comma_list),
            nouse_types: comma_list(nouse),
            ..GpuAsk::default()
        };
        assert!(ask(Some("a100"), "").accepts(&a100));
        assert!(!ask(Some("T4"), "").accepts(&a100));
        assert!(ask(Some("A100"), "A100").accepts(&a100));
        assert!(!ask(None, "A100").accepts(&a100));
        let unhealthy = Gpu {
            healthy: false,
            ..t4("GPU-2")
        };
        assert!(!ask(None, "").accepts(&unhealthy));
        let uuids = GpuAsk {
            use_uuids: Some(vec!["GPU-1".into()]),
            nouse_uuids: vec!["GPU-1".into()],
            ..GpuAsk::default()
        };
        assert!(!uuids.accepts(&a100), "the deny list wins");
    }

    #[test]
    fn memory_defaults_to_the_whole_card_and_a_percentage_wins() {
        let gpu = t4("GPU-a");
        let ask = |memory, percent| ContainerAsk {
            index: 0,
            number: 1,
            memory,
            percent,
            cores: 0,
        };
        assert_eq!(ask(0, None).memory_on(&gpu), 15360);
        assert_eq!(ask(3000, None).memory_on(&gpu), 3000);
        assert_eq!(ask(3000, Some(50)).memory_on(&gpu), 7680);
    }

    #[test]
    fn gpushare_cards_split_the_nodes_memory_and_unhealthy_ones_are_left_out() {
        let cards = share_gpus(48000, 3, Some("1, x"));
        let ids: Vec<&str> = cards.iter().map(|g| g.uuid.as_str()).collect();
        assert_eq!(ids, ["gpushare-0", "gpushare-2"]);
        assert!(
            cards
                .iter()
                .all(|g| g.memory == 16000 && g.model == SHARE_MODEL)
        );
        assert!(share_gpus(1000, 0, None).is_empty());
        // Memory is summed over containers (an init container's counts if larger); without
        // memory, cards by number, whole and alone.
        let m = share_ask(&[(3000, 0), (2000, 0)], (6000, 0)).unwrap();
        assert_eq!((m.asks[0].number, m.asks[0].memory), (1, 6000));
        let n = share_ask(&[(0, 1), (0, 1)], (0, 0)).unwrap();
        assert_eq!((n.asks[0].number, n.asks[0].cores), (2, FULL_CORES));
        assert!(share_ask(&[(0, 0)], (0, 0)).is_none());
        let held = Grants::of_share_indices("0,2", &n);
        assert_eq!(held.share_indices().as_deref(), Some("0,2"));
        assert_eq!(Grants::parse("GPU-a,NVIDIA,10,0:").share_indices(), None);
        let vgpu = GpuAsk::default();
        assert!(!vgpu.accepts(&cards[0]) && n.accepts(&cards[0]));
    }
}
