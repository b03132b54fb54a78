//! The fleet format's storage and devices: StorageClasses, DeviceClasses, local volumes and a
//! DRA driver's devices per node pool are read, checked with a clear error naming the field,
//! and become the same Kubernetes objects for `tephra dev` as for the simulator.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use tephra_sim::Scenario;
use tephra_sim::scenario::objects;

const FLEET: &str = r#"
fleet:
  clusters:
    - name: east
      zone: east-a
      storageClasses:
        - {name: local, provisioner: kubernetes.io/no-provisioner, volumeBindingMode: WaitForFirstConsumer}
        - {name: fast, provisioner: csi.example.com, default: true, allowedTopologies: {topology.kubernetes.io/zone: [east-a]}}
      deviceClasses:
        - {name: gpu.example.com, selectors: ["device.driver == 'gpu.example.com'"]}
      nodePools:
        - name: gpu
          count: 2
          capacity: {cpu: "32", memory: 128Gi, pods: "110"}
          volumes: [{storageClass: local, capacity: 1Ti, count: 2}]
          devices: {driver: gpu.example.com, count: 4, attributes: {model: H100, index: 0, mig: false}, capacity: {memory: 80Gi}}
"#;

#[test]
fn a_pools_volumes_and_devices_become_volumes_and_slices_per_node() {
    let s = Scenario::parse(FLEET, "fleet.yaml", Path::new(".")).unwrap();
    let objs = objects::objects(&s.fleet.clusters[0]);
    let of = |kind: &str| objs.iter().filter(|o| o["kind"] == kind).count();
    assert_eq!((of("StorageClass"), of("DeviceClass")), (2, 1));
    assert_eq!(of("PersistentVolume"), 4, "two nodes, two volumes each");
    assert_eq!(of("ResourceSlice"), 2);
    let pv = objs
        .iter()
        .find(|o| o["kind"] == "PersistentVolume")
        .unwrap();
    assert_eq!(
        pv.pointer("/spec/nodeAffinity/required/nodeSelectorTerms/0/matchExpressions/0/values/0"),
        Some(&serde_json::json!("east-gpu-0"))
    );
    let slice = objs.iter().find(|o| o["kind"] == "ResourceSlice").unwrap();
    assert_eq!(slice["spec"]["devices"].as_array().unwrap().len(), 4);
    assert_eq!(
        slice["spec"]["devices"][0]["attributes"]["index"],
        serde_json::json!({"int": 0})
    );
    let fast = objs
        .iter()
        .find(|o| o["metadata"]["name"] == "fast")
        .unwrap();
    assert_eq!(
        fast["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"],
        "true"
    );
    // The simulator takes the same objects into its cache: the run starts and ends cleanly.
    let report = tephra_sim::run(&s, Default::default(), &mut |_| {}, &mut |_| {}).unwrap();
    assert!(report.violations.is_empty());
}

#[test]
fn a_volume_of_an_unknown_class_or_a_bad_selector_is_refused_naming_the_field() {
    let bad_class = FLEET.replace("storageClass: local,", "storageClass: nvme,");
    let e = Scenario::parse(&bad_class, "f.yaml", Path::new("."))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("nodePools[0] (gpu).volumes[0].storageClass"),
        "{e}"
    );
    let bad_cel = FLEET.replace("device.driver == 'gpu.example.com'", "device.driver ==");
    let e = Scenario::parse(&bad_cel, "f.yaml", Path::new("."))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("deviceClasses[0].selectors[0]: CEL compile error"),
        "{e}"
    );
    let bad_mode = FLEET.replace(
        "volumeBindingMode: WaitForFirstConsumer",
        "volumeBindingMode: Later",
    );
    let e = Scenario::parse(&bad_mode, "f.yaml", Path::new("."))
        .unwrap_err()
        .to_string();
    assert!(e.contains("volumeBindingMode"), "{e}");
}

#[test]
fn a_pools_shared_gpus_are_registered_on_each_node_with_the_plugins_resources() {
    let text = r#"
fleet:
  clusters:
    - name: east
      nodePools:
        - name: a100
          count: 2
          capacity: {cpu: "32", memory: 128Gi, pods: "110"}
          vgpus: {count: 2, memory: 40960}
"#;
    let s = Scenario::parse(text, "fleet.yaml", Path::new(".")).unwrap();
    let (c, pool) = (&s.fleet.clusters[0], &s.fleet.clusters[0].node_pools[0]);
    let capacity = objects::pool_capacity(pool);
    assert_eq!(
        capacity["volcano.sh/vgpu-number"], "20",
        "two GPUs, split 10"
    );
    assert_eq!(capacity["volcano.sh/vgpu-memory"], "81920");
    assert_eq!(capacity["volcano.sh/vgpu-cores"], "200");
    let a = objects::node_annotations(c, pool, 1);
    let registered =
        tephra_scheduler::model::vgpu::parse_register(&a["volcano.sh/node-vgpu-register"]).unwrap();
    assert_eq!(registered.len(), 2);
    assert_eq!(registered[1].uuid, "GPU-east-a100-1-1");
    assert_eq!((registered[0].split, registered[0].memory), (10, 40960));
    // A pool whose GPUs the plugin could not register is refused, naming the field.
    let bad = text.replace(
        "{count: 2, memory: 40960}",
        "{count: 2, memory: 40960, model: T4}",
    );
    let e = Scenario::parse(&bad, "fleet.yaml", Path::new("."))
        .unwrap_err()
        .to_string();
    assert!(e.contains("nodePools[0] (a100).vgpus.model"), "{e}");
}
