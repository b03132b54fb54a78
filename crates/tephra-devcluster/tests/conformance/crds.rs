//! CustomResourceDefinitions: admission that names the field, generation and the status
//! subresource, discovery with short names, and a CRD applied at run time (a bad rule refused).

use super::*;

#[tokio::test]
async fn crd_admission_refuses_a_broken_manifest_naming_the_field() {
    let h = common::single().await;
    let client = common::client(&h, "local").await;
    let jobs = jobs(&client, "default");
    let broken: DynamicObject =
        serde_json::from_value(manifest("tests/broken/job-negative-replicas.yaml")).unwrap();
    let err = api_err(
        jobs.create(&PostParams::default(), &broken)
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert!(
        err.message
            .starts_with("Job.batch.volcano.sh \"broken\" is invalid: spec.tasks[0].replicas"),
        "{}",
        err.message
    );
    let details = err.details.unwrap();
    assert_eq!(details.causes[0].field, "spec.tasks[0].replicas");

    // Unknown fields: refused with Strict field validation, pruned otherwise.
    let misspelled = manifest("tests/broken/job-misspelled-field.yaml");
    let strict = PatchParams::apply("test").validation_strict();
    let err = api_err(
        jobs.patch("broken", &strict, &Patch::Apply(misspelled.clone()))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 400);
    assert!(
        err.message.contains("unknown field \"spec.minAvailble\""),
        "{}",
        err.message
    );
    let pruned = jobs
        .create(
            &PostParams::default(),
            &serde_json::from_value(misspelled).unwrap(),
        )
        .await
        .unwrap();
    assert!(pruned.data["spec"].get("minAvailble").is_none());
    // Schema defaults apply.
    assert_eq!(pruned.data["spec"]["queue"], "default");
}

#[tokio::test]
async fn custom_resources_follow_generation_and_the_status_subresource() {
    let h = common::single().await;
    let q = queues(&common::client(&h, "local").await);
    let created = q
        .create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"}, "spec": {}, "status": {"state": "Bogus"}})).unwrap())
        .await
        .unwrap();
    assert_eq!(created.data["spec"]["weight"], 1, "schema default");
    assert!(
        created.data.get("status").is_none(),
        "status is dropped on create"
    );
    assert_eq!(created.metadata.generation, Some(1));
    let labelled = q
        .patch(
            "q",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(1));
    let spec = q
        .patch(
            "q",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"weight": 4}, "status": {"state": "Ignored"}})),
        )
        .await
        .unwrap();
    assert_eq!(spec.metadata.generation, Some(2));
    assert!(
        spec.data.get("status").is_none(),
        "the main resource ignores status"
    );
    let status = q
        .patch_status(
            "q",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"state": "Open"}, "spec": {"weight": 9}})),
        )
        .await
        .unwrap();
    assert_eq!(status.data["status"]["state"], "Open");
    assert_eq!(
        status.data["spec"]["weight"], 4,
        "the status subresource ignores spec"
    );
    assert_eq!(status.metadata.generation, Some(2));
    // A status replace that leaves out the spec and adds a field of its own changes only
    // the status.
    let body = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": "q", "resourceVersion": status.metadata.resource_version,
                     "labels": {"ignored": "yes"}},
        "extra": true, "status": {"state": "Closed"}});
    let replaced = q
        .replace_status(
            "q",
            &PostParams::default(),
            &serde_json::from_value(body).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(replaced.data["status"]["state"], "Closed");
    assert_eq!(replaced.data["spec"]["weight"], 4, "spec kept");
    assert!(
        replaced.data.get("extra").is_none(),
        "no new top-level field"
    );
    assert_eq!(replaced.metadata.labels, labelled.metadata.labels);
    assert_eq!(replaced.metadata.generation, Some(2));
}

#[tokio::test]
async fn discovery_serves_built_in_kinds_and_crds_with_short_names() {
    let h = common::single().await;
    let client = common::client(&h, "local").await;
    for discovery in [
        Discovery::new(client.clone()).run().await.unwrap(),
        Discovery::new(client.clone())
            .run_aggregated()
            .await
            .unwrap(),
    ] {
        let (ar, caps) = discovery
            .resolve_gvk(&GroupVersionKind::gvk(
                "batch.volcano.sh",
                "v1alpha1",
                "Job",
            ))
            .expect("jobs served");
        assert_eq!(ar.plural, "jobs");
        assert!(
            caps.subresources
                .iter()
                .any(|(s, _)| s.plural == "jobs/status" || s.plural == "status")
        );
        assert!(
            discovery
                .resolve_gvk(&GroupVersionKind::gvk(
                    "policy",
                    "v1",
                    "PodDisruptionBudget"
                ))
                .is_some()
        );
        assert!(
            discovery
                .resolve_gvk(&GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease"))
                .is_some()
        );
    }
}

#[tokio::test]
async fn a_crd_applied_at_run_time_is_served_and_a_bad_rule_is_refused() {
    let h = common::single().await;
    let client = common::client(&h, "local").await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = |rule: &str| -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {"size": {"type": "integer", "default": 3}},
                                 "x-kubernetes-validations": [{"rule": rule, "message": "size must be below 10"}]}}}}}]}
        }))
        .unwrap()
    };
    let err = api_err(
        crds.create(&PostParams::default(), &crd("self.size <"))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message.contains("compilation failed"),
        "{}",
        err.message
    );
    crds.create(&PostParams::default(), &crd("self.size < 10"))
        .await
        .unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let w = widgets
        .create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}})).unwrap())
        .await
        .unwrap();
    assert_eq!(w.data["spec"]["size"], 3);
    let err = api_err(
        widgets
            .create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "big"}, "spec": {"size": 12}})).unwrap())
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message.contains("size must be below 10"),
        "{}",
        err.message
    );
    // Deleting the CRD stops serving its resources.
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    let err = api_err(widgets.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(err.code, 404);
}

/// As kube-apiserver decodes: a field of the wrong JSON type in a built-in object's body is a
/// 400 `BadRequest`; in the result of a patch, a 422 on the field `patch`; in a custom
/// resource, its `metadata` is decoded the same way while the rest is its schema's business.
#[tokio::test]
async fn a_field_of_the_wrong_json_type_is_refused_as_the_decoder_refuses_it() {
    let h = common::single().await;
    let client = common::client(&h, "local").await;
    let cm = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("", "v1", "ConfigMap"),
        "configmaps",
    );
    let cms: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &cm);
    let body = |data: Value| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "typed"}, "data": data}))
        .unwrap()
    };
    let err = api_err(
        cms.create(&PostParams::default(), &body(json!({"k": 5})))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (400, "BadRequest"));
    assert!(
        err.message.contains("cannot be handled as a ConfigMap"),
        "{}",
        err.message
    );
    cms.create(&PostParams::default(), &body(json!({"k": "v"})))
        .await
        .unwrap();
    let err = api_err(
        cms.patch(
            "typed",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": 5}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert_eq!(err.details.unwrap().causes[0].field, "patch");
    let err = api_err(
        cms.patch(
            "typed",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": "a=b"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert_eq!(cms.get("typed").await.unwrap().data["data"]["k"], "v");

    let q = queues(&client);
    q.create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "typed"}, "spec": {"weight": 1}})).unwrap())
        .await
        .unwrap();
    let err = api_err(
        q.patch(
            "typed",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": 5}}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        (err.code, err.details.unwrap().causes[0].field.as_str()),
        (422, "patch")
    );
    // The schema's own type check names the field.
    let err = api_err(
        q.patch(
            "typed",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"weight": "1"}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        (err.code, err.details.unwrap().causes[0].field.as_str()),
        (422, "spec.weight")
    );
}
