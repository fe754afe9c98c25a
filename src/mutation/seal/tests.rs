use super::*;
use crate::json::json;

fn spec(container: &str, target: &str, host: &str) -> Value {
    json!({
        "containers": [{"name": container, "volumeMounts": [{"name": "s", "mountPath": "/data"}],
            "lifecycle": {"preStop": {"exec": {"command": [
                PROGRAM, "hook", "--target", target, "--host", host]}}}}],
        "volumes": [{"name": "s", "hostPath": {"path": "/mnt/scratch/x"}}],
    })
}

/// Length prefixes keep the fields apart: moving characters from one field into its
/// neighbour gives another message, so another tag.
#[test]
fn length_prefixes_keep_fields_apart() {
    let a = message("ab", &spec("c", "/data", "/mnt/scratch/x"), None).unwrap();
    let b = message("a", &spec("bc", "/data", "/mnt/scratch/x"), None).unwrap();
    assert_ne!(a, b);
    assert!(a.starts_with(DOMAIN));
    // Absent and default are one thing; a value of another type is not a string.
    let mut typed = spec("c", "/data", "/mnt/scratch/x");
    let plain = message("n", &typed, None).unwrap();
    typed["containers"][0]["volumeMounts"][0]["readOnly"] = json!(false);
    typed["containers"][0]["volumeMounts"][0]["subPath"] = json!("");
    typed["volumes"][0]["hostPath"]["type"] = json!("");
    assert_eq!(message("n", &typed, None).unwrap(), plain);
    typed["volumes"][0]["hostPath"]["type"] = json!(0);
    assert_ne!(message("n", &typed, None).unwrap(), plain);
    // Nothing to seal without a cleanup container.
    assert_eq!(
        message("n", &json!({"containers": [{"name": "c"}]}), None),
        None
    );
}

#[test]
fn a_seal_verifies_only_for_its_namespace_and_spec() {
    let keys = SealKeys::parse(&"ab".repeat(32)).unwrap();
    let spec = spec("c", "/data", "/mnt/scratch/x");
    let sealed = seal(&keys, "n", &spec).unwrap();
    assert!(sealed.starts_with(VERSION));
    assert_eq!(
        verify(&keys, "n", &spec, None, Some(&sealed)),
        Verdict::Sealed
    );
    assert_eq!(
        verify(&keys, "m", &spec, None, Some(&sealed)),
        Verdict::Mismatch
    );
    assert_eq!(verify(&keys, "n", &spec, None, None), Verdict::Unsealed);
    assert_eq!(
        verify(&keys, "n", &spec, None, Some("v2:AAAA")),
        Verdict::Unsealed
    );
    assert_eq!(
        verify(&keys, "n", &spec, None, Some("v1:not base64!")),
        Verdict::Unsealed
    );
    assert_eq!(
        verify(&SealKeys::default(), "n", &spec, None, Some(&sealed)),
        Verdict::Unsealed
    );
    assert_eq!(seal(&SealKeys::default(), "n", &spec), None);
}

/// Issue 38, class 2: the reap annotation's exact text and its targets' mounts are sealed,
/// appended to what earlier releases sealed, so that a pod without one still verifies
/// under a seal made before it existed.
#[test]
fn the_reap_annotation_is_sealed_and_its_absence_changes_nothing() {
    let spec = spec("c", "/data", "/mnt/scratch/x");
    let without = message("n", &spec, None).unwrap();
    let text = r#"[{"container":"c","target":"/data","host":"/mnt/scratch/x"}]"#;
    let with = message("n", &spec, Some(text)).unwrap();
    assert!(with.starts_with(&without) && with.len() > without.len());
    let elsewhere = r#"[{"container":"c","target":"/data","host":"/mnt/scratch/y"}]"#;
    assert_ne!(message("n", &spec, Some(elsewhere)).unwrap(), with);
    // Nothing runs a cleanup in the pod, but a target is left to the reaper: sealed.
    let bare = json!({
        "containers": [{"name": "c", "volumeMounts": [{"name": "s", "mountPath": "/data"}]}],
        "volumes": [{"name": "s", "hostPath": {"path": "/mnt/scratch/x"}}],
    });
    assert!(message("n", &bare, Some(text)).is_some());
    assert_eq!(message("n", &bare, None), None);
    // Its targets parse back as a cleanup of that container; a container it does not
    // have is an error, not a target.
    let cleaners = reaper_targets(&bare, text).unwrap();
    assert_eq!(cleaners.len(), 1);
    assert_eq!(cleaners[0].place, Place::Reaper);
    assert_eq!(
        cleaners[0].targets[0].host.as_deref(),
        Some("/mnt/scratch/x")
    );
    let ghost = r#"[{"container":"ghost","target":"/data","host":"/mnt/scratch/x"}]"#;
    assert!(reaper_targets(&bare, ghost).is_err());
}
