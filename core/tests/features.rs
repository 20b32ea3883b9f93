//! The optional features, exercised on the host: `serde` round-trips the
//! public data, `arbitrary` builds inputs from raw bytes, and both respect
//! the fixed capacities (a too-long name or list is an error, not a panic).
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

#[cfg(feature = "serde")]
mod serde_feature {
    use grace_core::{DeleteOptions, Name, Propagation, Record, Timestamp};

    fn name(s: &str) -> Name {
        Name::try_from_str(s).expect("short name")
    }

    #[test]
    fn record_round_trips_through_json() {
        let mut record: Record<4> = Record::new(name("uid-1"));
        record.deletion_timestamp = Some(Timestamp::from_unix_seconds(1030));
        record.deletion_grace_period_seconds = Some(30);
        record
            .finalizers
            .push(name("example.com/backup"))
            .expect("room for one finalizer");
        let json = serde_json::to_string(&record).expect("serializes");
        let back: Record<4> = serde_json::from_str(&json).expect("deserializes");
        assert_eq!(back, record);
    }

    #[test]
    fn delete_options_round_trip_through_json() {
        let mut options = DeleteOptions::with_grace(i64::MIN);
        options.propagation_policy = Some(Propagation::Foreground);
        options.dry_run = true;
        let json = serde_json::to_string(&options).expect("serializes");
        let back: DeleteOptions = serde_json::from_str(&json).expect("deserializes");
        assert_eq!(back, options);
    }

    #[test]
    fn lifecycle_mid_kill_round_trips_with_its_deadlines() {
        use grace_core::{Action, ContainerSpec, Input, Lifecycle, Now, Strategy};
        let hooked = ContainerSpec {
            pre_stop: true,
            ..ContainerSpec::default()
        };
        let mut pod: Lifecycle<4, 2> =
            Lifecycle::new(Strategy::POD, Record::new(name("uid-1")), &[hooked]).expect("fits");
        let at = Now::from_unix_millis;
        let _ = pod
            .handle(at(1_000_000), Input::Delete(DeleteOptions::with_grace(10)))
            .delete()
            .unwrap();
        let _ = pod.handle(at(1_000_000), Input::AgentSync).handled();
        assert_eq!(pod.poll_action(), Some(Action::RemoveEndpoints));
        // One action still owed when the state is saved.
        let json = serde_json::to_string(&pod).expect("serializes");
        let mut back: Lifecycle<4, 2> = serde_json::from_str(&json).expect("deserializes");
        assert_eq!(back, pod);
        assert_eq!(
            back.poll_action(),
            Some(Action::RunPreStop {
                container: 0,
                budget_seconds: 10
            })
        );
        assert_eq!(back.poll_timeout().map(|t| t.as_millis()), Some(1_010_000));
    }

    #[test]
    fn lifecycle_decoded_in_place_is_the_one_decoded_whatever_the_place_held() {
        use serde::Deserialize;
        let mut pod = pod_owing_outputs();
        let json = serde_json::to_string(&pod).expect("serializes");
        // The place holds another lifecycle, with more containers.
        let mut place = pod_owing_outputs();
        let _ = drain(&mut place);
        let mut deserializer = serde_json::Deserializer::from_str(&json);
        grace_core::Lifecycle::deserialize_in_place(&mut deserializer, &mut place)
            .expect("deserializes");
        assert_eq!(place, pod);
        assert_eq!(drain(&mut place), drain(&mut pod));
    }

    /// A pod that owes several outputs across its containers, none taken.
    fn pod_owing_outputs() -> grace_core::Lifecycle<4, 4> {
        use grace_core::{ContainerSpec, Input, Lifecycle, Now, Strategy};
        let app = ContainerSpec::default();
        let hooked = ContainerSpec {
            pre_stop: true,
            ..app
        };
        let mut pod = Lifecycle::new(
            Strategy::POD,
            Record::new(name("uid-1")),
            &[hooked, app, app],
        )
        .expect("fits");
        let at = Now::from_unix_millis;
        let _ = pod
            .handle(at(1_000_000), Input::Delete(DeleteOptions::with_grace(10)))
            .delete()
            .unwrap();
        let _ = pod.handle(at(1_000_000), Input::AgentSync).handled();
        let _ = pod
            .handle(at(1_000_100), Input::container_exited(2))
            .container();
        pod
    }

    fn drain(pod: &mut grace_core::Lifecycle<4, 4>) -> Vec<grace_core::Action> {
        core::iter::from_fn(|| pod.poll_action()).collect()
    }

    #[test]
    fn owed_outputs_keep_their_order_through_a_round_trip() {
        let mut pod = pod_owing_outputs();
        let json = serde_json::to_string(&pod).expect("serializes");
        let mut back: grace_core::Lifecycle<4, 4> =
            serde_json::from_str(&json).expect("deserializes");
        assert_eq!(back, pod);
        let expected = drain(&mut pod);
        assert_eq!(expected.len(), 5);
        assert_eq!(drain(&mut back), expected);
        // Once everything is taken, both are equal again.
        assert_eq!(back, pod);
    }

    #[test]
    fn places_in_the_saved_form_decide_the_order_on_restore() {
        use grace_core::Action;
        let pod = pod_owing_outputs();
        let mut json: serde_json::Value = serde_json::to_value(&pod).expect("serializes");
        // Saved as places: endpoints 1, containers 2, 3, 4.
        assert_eq!(json["endpoints_since"], 1);
        assert_eq!(json["containers"][2]["owed_since"], 4);
        // Another order: container 2 first, then endpoints, 1, 0 (places
        // need not be consecutive, as earlier versions wrote them).
        json["containers"][2]["owed_since"] = 3.into();
        json["endpoints_since"] = 5.into();
        json["containers"][1]["owed_since"] = 9.into();
        json["containers"][0]["owed_since"] = 12.into();
        let mut back: grace_core::Lifecycle<4, 4> =
            serde_json::from_value(json.clone()).expect("deserializes");
        assert_eq!(
            drain(&mut back),
            [
                Action::SendStopSignal { container: 2 },
                Action::ContainerStopped { container: 2 },
                Action::RemoveEndpoints,
                Action::SendStopSignal { container: 1 },
                Action::RunPreStop {
                    container: 0,
                    budget_seconds: 10
                },
            ]
        );
        // An owing container without a place is still handed out, last.
        json["containers"][2]["owed_since"] = 0.into();
        let mut back: grace_core::Lifecycle<4, 4> =
            serde_json::from_value(json).expect("deserializes");
        let out = drain(&mut back);
        assert_eq!(out.len(), 5);
        assert_eq!(
            out[3..],
            [
                Action::SendStopSignal { container: 2 },
                Action::ContainerStopped { container: 2 },
            ]
        );
    }

    #[test]
    fn a_name_beyond_capacity_is_a_deserialization_error() {
        let long = format!("\"{}\"", "x".repeat(grace_core::NAME_CAPACITY + 1));
        assert!(serde_json::from_str::<Name>(&long).is_err());
        let fits = format!("\"{}\"", "x".repeat(grace_core::NAME_CAPACITY));
        assert!(serde_json::from_str::<Name>(&fits).is_ok());
    }

    #[test]
    fn too_many_finalizers_is_a_deserialization_error() {
        let mut record: Record<1> = Record::new(name("uid-1"));
        record.finalizers.push(name("a")).expect("room for one");
        let mut json: serde_json::Value = serde_json::to_value(&record).expect("serializes");
        json["finalizers"] = serde_json::json!(["a", "b"]);
        assert!(serde_json::from_value::<Record<1>>(json).is_err());
    }
}

#[cfg(feature = "arbitrary")]
mod arbitrary_feature {
    use arbitrary::{Arbitrary, Unstructured};
    use grace_core::{DeleteOptions, NAME_CAPACITY, Name};

    #[test]
    fn arbitrary_builds_options_and_names_from_any_bytes() {
        // Every byte pattern gives either a value or an arbitrary error.
        for seed in 0u8..=255 {
            let bytes: Vec<u8> = (0..512u32)
                .map(|i| seed.wrapping_mul(31).wrapping_add(i as u8))
                .collect();
            let mut u = Unstructured::new(&bytes);
            let _ = DeleteOptions::arbitrary(&mut u);
            if let Ok(name) = Name::arbitrary(&mut u) {
                assert!(name.as_str().len() <= NAME_CAPACITY);
            }
        }
    }
}
