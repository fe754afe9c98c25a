//! The Event's composition, as pure functions: reason by outcome, the message's bound,
//! the rate.

use super::*;

#[test]
fn each_outcome_has_its_reason_and_type() {
    let expected = [
        (Outcome::Emptied, Kind::Normal, "PrestopCleanup"),
        (Outcome::Skipped, Kind::Warning, "PrestopCleanupSkipped"),
        (Outcome::Refused, Kind::Warning, "PrestopCleanupRefused"),
        (
            Outcome::Incomplete,
            Kind::Warning,
            "PrestopCleanupIncomplete",
        ),
        (Outcome::CutOff, Kind::Warning, "PrestopCleanupCutOff"),
    ];
    for (outcome, kind, name) in expected {
        assert_eq!(reason(outcome), (kind, name), "{outcome:?}");
    }
    assert_eq!(expected.len(), Outcome::ALL.len());
}

#[test]
fn the_message_is_one_line_of_at_most_a_kilobyte() {
    assert_eq!(
        message("emptied /scratch: 3 entries"),
        "emptied /scratch: 3 entries"
    );
    assert_eq!(message("a\nb\u{1b}c"), "a\\nb\\u{1b}c");
    for line in [
        "x".repeat(5000),
        "é".repeat(5000),
        format!("x{}", "€".repeat(600)),
    ] {
        let cut = message(&line);
        assert!(cut.len() <= MAX_MESSAGE, "{}", cut.len());
        assert!(cut.len() > MAX_MESSAGE - 4, "{}", cut.len());
        assert!(cut.ends_with('…'));
        assert!(line.starts_with(cut.trim_end_matches('…')));
    }
    let exactly = "y".repeat(MAX_MESSAGE);
    assert_eq!(message(&exactly), exactly);
}

#[test]
fn a_pod_looping_on_reports_gets_five_a_minute() {
    let mut rate = Rate::default();
    let start = Instant::now();
    for i in 0..PER_POD {
        assert_eq!(
            rate.admit("greedy", start + Duration::from_millis(i as u64)),
            Ok(())
        );
    }
    let over = rate.admit("greedy", start + Duration::from_secs(1));
    assert!(over.unwrap_err().contains("per pod"));
    // Another pod is not held back by it.
    assert_eq!(rate.admit("other", start + Duration::from_secs(1)), Ok(()));
    // A window later the pod may again.
    assert_eq!(
        rate.admit("greedy", start + WINDOW + Duration::from_millis(10)),
        Ok(())
    );
}

/// Issue 39, "no tenant can wedge the agent": one shared bound of 60 Events a minute let
/// 12 pods looping on reports silence every other pod of the node, and dropped the
/// reports of a batch node's 61st and later pods ending together.
#[test]
fn looping_pods_share_the_repeats_and_never_take_another_pods_first_report() {
    let start = Instant::now();
    let mut rate = Rate::default();
    // 100 pods each looping: their first reports go, their repeats stop at the bound.
    let mut repeats = 0;
    for round in 0..PER_POD {
        for pod in 0..100 {
            let at = start + Duration::from_millis(round as u64);
            if rate.admit(&format!("looping-{pod}"), at).is_ok() && round > 0 {
                repeats += 1;
            }
        }
    }
    assert_eq!(repeats, REPEATS_PER_NODE);
    let over = rate
        .admit("looping-0", start + Duration::from_secs(1))
        .unwrap_err();
    assert!(over.contains("repeated Events per node"), "{over}");
    // Every other pod's first report still goes, up to a batch node's worth.
    let firsts = (0..FIRSTS_PER_NODE + 10)
        .filter(|i| {
            rate.admit(&format!("pod-{i}"), start + Duration::from_secs(2))
                .is_ok()
        })
        .count();
    assert_eq!(firsts, FIRSTS_PER_NODE - 100);
    let over = rate
        .admit("pod-late", start + Duration::from_secs(2))
        .unwrap_err();
    assert!(over.contains("pods' first Events per node"), "{over}");
    // And forgets them once their window has passed.
    assert_eq!(
        rate.admit("pod-late", start + Duration::from_secs(2) + WINDOW),
        Ok(())
    );
    assert_eq!(rate.pods.len(), 1);
}

#[test]
fn the_event_is_on_the_pod_the_kernel_named_in_its_namespace() {
    let pod = PodRef {
        namespace: "team-a".to_owned(),
        name: "job-x-1".to_owned(),
        uid: "0b5e1c9e-3f1d-4c1e-9a43-6f0e2c5d7a11".to_owned(),
    };
    let now = Utc::now();
    let event = pod_event(
        &pod,
        "node-1",
        Outcome::CutOff,
        "cut off by its deadline",
        now,
    );
    let value = serde_json::to_value(&event).unwrap();
    assert_eq!(value["metadata"]["namespace"], "team-a");
    assert_eq!(
        value["metadata"]["generateName"],
        "job-x-1.prestop-cleanup."
    );
    assert_eq!(
        value["involvedObject"],
        serde_json::json!({"apiVersion": "v1", "kind": "Pod", "namespace": "team-a",
                           "name": "job-x-1", "uid": "0b5e1c9e-3f1d-4c1e-9a43-6f0e2c5d7a11"})
    );
    assert_eq!(value["reason"], "PrestopCleanupCutOff");
    assert_eq!(value["type"], "Warning");
    assert_eq!(value["message"], "cut off by its deadline");
    assert_eq!(value["source"]["host"], "node-1");
    assert_eq!(value["count"], 1);
}

/// Without the pod in the picture, or outside any pod, nothing is recorded; within the
/// rate a known pod's report is queued; over it, dropped.
#[tokio::test]
async fn only_a_pod_the_picture_knows_gets_an_event() {
    use k8s_openapi::api::core::v1::Pod;
    use kube::runtime::watcher::Event as Change;
    let pods = NodePods::new();
    let uid = "0b5e1c9e-3f1d-4c1e-9a43-6f0e2c5d7a11";
    let mut pod = Pod::default();
    pod.metadata.namespace = Some("team-a".to_owned());
    pod.metadata.name = Some("job-x-1".to_owned());
    pod.metadata.uid = Some(uid.to_owned());
    pods.change(|picture| picture.apply(Change::Apply(pod)));
    let (queue, mut receiver) = mpsc::channel(QUEUE);
    let events = PodEvents {
        queue,
        rate: Mutex::new(Rate::default()),
        pods,
        node: "node-1".to_owned(),
    };
    assert!(matches!(
        events.report(None, Outcome::Emptied, "x"),
        Told::Logged(_)
    ));
    let Told::Logged(why) = events.report(Some("another-uid"), Outcome::Emptied, "x") else {
        panic!()
    };
    assert!(why.contains("no pod of uid another-uid"), "{why}");
    for _ in 0..PER_POD {
        assert_eq!(
            events.report(Some(uid), Outcome::Refused, "refused"),
            Told::Recorded
        );
    }
    assert!(matches!(
        events.report(Some(uid), Outcome::Refused, "refused"),
        Told::Dropped(_)
    ));
    let event = receiver.recv().await.unwrap();
    assert_eq!(event.involved_object.name.as_deref(), Some("job-x-1"));
    assert_eq!(event.reason.as_deref(), Some(REFUSED));
}
