//! The optional features, exercised on the host: `serde` round-trips the
//! public data, `arbitrary` builds inputs from raw bytes, and both respect
//! the fixed capacities (a too-long name or list is an error, not a panic).

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
        use grace_core::{Action, ContainerSpec, Lifecycle, Now, Strategy};
        let hooked = ContainerSpec {
            pre_stop: true,
            ..ContainerSpec::default()
        };
        let mut pod: Lifecycle<4, 2> =
            Lifecycle::new(Strategy::POD, Record::new(name("uid-1")), &[hooked]).expect("fits");
        let at = Now::from_unix_millis;
        let _ = pod.handle_delete(at(1_000_000), &DeleteOptions::with_grace(10));
        let _ = pod.handle_agent_sync(at(1_000_000));
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
    fn a_name_beyond_capacity_is_a_deserialization_error() {
        let long = format!("\"{}\"", "x".repeat(64));
        assert!(serde_json::from_str::<Name>(&long).is_err());
        let fits = format!("\"{}\"", "x".repeat(63));
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
