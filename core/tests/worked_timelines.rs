//! The five worked timelines of core/RULES.md ("Worked timelines"), each driven end to end
//! through [`Lifecycle`]: every action at its exact millisecond, the record
//! (deletion timestamp, deletion grace, generation) after each step, and
//! the phases Live → GracefulPending → Terminating → Deleted.
//!
//! `T` is the (whole-second) instant of the first delete; the agent observes
//! the record `δ` = 500 ms later. Instants are milliseconds after `T` on both
//! clocks (wall for the API, monotonic for the agent).
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use grace_core::Input;
use grace_core::{
    Action, ContainerSpec, DeleteOptions, DeleteOutcome, DeleteResponse, Handled, Instant,
    Lifecycle, Name, Now, Phase, Record, Stage, Strategy, Timestamp, WallTime,
};

// ---- helpers ------------------------------------------------------------------

type Pod = Lifecycle<4, 4>;

/// The first delete, in whole unix seconds.
const T: i64 = 1_700_000_000;
const T_MS: i64 = T * 1000;
/// When the agent first observes the deletion, ms after `T`.
const DELTA: i64 = 500;

/// An app without a pre-stop hook.
const APP: ContainerSpec = ContainerSpec {
    pre_stop: false,
    sidecar: false,
    stopped: false,
};
/// An app with a pre-stop hook.
const HOOKED: ContainerSpec = ContainerSpec {
    pre_stop: true,
    ..APP
};

/// `ms` milliseconds after `T`, on both clocks.
fn at(ms: i64) -> Now {
    Now::from_unix_millis(T_MS + ms)
}

/// A monotonic instant as ms after `T`.
fn rel(i: Instant) -> i64 {
    i64::try_from(i.as_millis()).expect("instant fits i64") - T_MS
}

/// A live, scheduled, running pod with spec grace 30 and `containers`.
fn pod(containers: &[ContainerSpec]) -> Pod {
    let record = Record::new(Name::try_from("pod-uid-1").expect("short name"));
    Lifecycle::new(Strategy::POD, record, containers).expect("within capacity")
}

/// Takes every owed action, in order.
fn drain(p: &mut Pod) -> Vec<Action> {
    let mut out = Vec::new();
    while let Some(a) = p.poll_action() {
        out.push(a);
    }
    out
}

/// The next deadline, ms after `T`.
fn next(p: &Pod) -> Option<i64> {
    p.poll_timeout().map(rel)
}

/// Advances exactly to the next deadline, handles it and drains.
fn advance(p: &mut Pod) -> (i64, Vec<Action>) {
    let deadline = p.poll_timeout().expect("a deadline is pending");
    let wall = i64::try_from(deadline.as_millis()).unwrap_or(i64::MAX);
    let _ = p.handle(
        Now::new(WallTime::from_unix_millis(wall), deadline),
        Input::Timeout,
    );
    (rel(deadline), drain(p))
}

/// A timeout call 1 ms before the next deadline does nothing.
fn nothing_before_next(p: &mut Pod) {
    let ms = next(p).expect("a deadline is pending") - 1;
    let _ = p.handle(at(ms), Input::Timeout);
    assert_eq!(drain(p), [], "nothing is due at {ms} ms");
}

fn delete(p: &mut Pod, ms: i64, grace: Option<i64>) -> DeleteResponse {
    let options = DeleteOptions::default().with_grace_period(grace);
    p.handle(at(ms), Input::Delete(options.clone()))
        .delete()
        .unwrap()
        .expect("delete accepted")
}

/// Asserts the stored record: `ts` as seconds after `T`, dgps, generation.
fn assert_record(p: &Pod, ts: Option<i64>, dgps: Option<i64>, generation: i64) {
    let r = p.record();
    assert_eq!(
        r.deletion_timestamp,
        ts.map(|s| Timestamp::from_unix_seconds(T + s)),
        "deletion timestamp"
    );
    assert_eq!(r.deletion_grace_period_seconds, dgps, "deletion grace");
    assert_eq!(r.generation, generation, "generation");
}

fn term(container: u8) -> Action {
    Action::SendStopSignal { container }
}
fn kill(container: u8) -> Action {
    Action::SendKill { container }
}
fn gone(container: u8) -> Action {
    Action::ContainerStopped { container }
}
fn pre_stop(container: u8, budget_seconds: u32) -> Action {
    Action::RunPreStop {
        container,
        budget_seconds,
    }
}
const REMOVE: Action = Action::Remove { force: false };

/// Every phase the pod was seen in, consecutive repeats merged.
struct Phases(Vec<Phase>);

impl Phases {
    fn start(p: &Pod) -> Self {
        Phases(vec![p.phase()])
    }
    fn see(&mut self, p: &Pod) {
        if self.0.last() != Some(&p.phase()) {
            self.0.push(p.phase());
        }
    }
}

const FULL_PATH: [Phase; 4] = [
    Phase::Live,
    Phase::GracefulPending,
    Phase::Terminating,
    Phase::Deleted,
];

// ---- §7.1 ----------------------------------------------------------------------

/// `kubectl delete pod p` (spec 30, no preStop, app exits 4 s after SIGTERM).
#[test]
fn timeline_1_default_delete_app_exits_on_sigterm() {
    let mut p = pod(&[APP]);
    let mut phases = Phases::start(&p);
    assert_record(&p, None, None, 1);

    // API: ts = T+30, dgps = 30, generation 1 → 2, kept; out of endpoints.
    let r = delete(&mut p, 0, None);
    assert_eq!(r.outcome, DeleteOutcome::Graceful);
    assert!(!r.force);
    phases.see(&p);
    assert_eq!(p.phase(), Phase::GracefulPending);
    assert!(p.is_stored());
    assert_record(&p, Some(30), Some(30), 2);
    assert_eq!(drain(&mut p), [Action::RemoveEndpoints]);
    assert_eq!(p.poll_timeout(), None, "nothing counts down the timestamp");

    // Kubelet at T+δ: G = 30, SIGTERM now, SIGKILL due at T+δ+30.
    assert_eq!(
        p.handle(at(DELTA), Input::AgentSync).handled(),
        Handled::Applied
    );
    phases.see(&p);
    assert_eq!(p.phase(), Phase::Terminating);
    assert_eq!(p.agent().remembered_grace, 30);
    assert_eq!(drain(&mut p), [term(0)]);
    assert_eq!(
        p.containers()[0].stop_signal_sent_at().map(rel),
        Some(DELTA)
    );
    assert_eq!(next(&p), Some(DELTA + 30_000));
    assert_record(&p, Some(30), Some(30), 2);
    nothing_before_next(&mut p);

    // Exit at T+δ+4: the final delete (grace 0, uid) clamps ts to now
    // (T+4.5 → T+4), writes dgps 0, then removes.
    assert_eq!(
        p.handle(at(DELTA + 4_000), Input::container_exited(0))
            .container(),
        Ok(Handled::Applied)
    );
    phases.see(&p);
    assert_eq!(drain(&mut p), [gone(0), REMOVE]);
    assert!(!p.is_stored());
    assert_record(&p, Some(4), Some(0), 2);
    assert_eq!(p.record().resource_version, 3);
    assert_eq!(p.poll_timeout(), None);
    assert_eq!(phases.0, FULL_PATH);
}

// ---- §7.2 ----------------------------------------------------------------------

/// preStop `sleep 10`, app ignores SIGTERM: SIGTERM at +10, timeout
/// 30 − 10 = 20, SIGKILL at +30.
#[test]
fn timeline_2_pre_stop_ten_seconds_app_ignores_sigterm() {
    let mut p = pod(&[HOOKED]);
    let mut phases = Phases::start(&p);
    let _ = delete(&mut p, 0, None);
    phases.see(&p);
    assert_record(&p, Some(30), Some(30), 2);
    assert_eq!(drain(&mut p), [Action::RemoveEndpoints]);

    assert_eq!(
        p.handle(at(DELTA), Input::AgentSync).handled(),
        Handled::Applied
    );
    phases.see(&p);
    assert_eq!(drain(&mut p), [pre_stop(0, 30)]);
    assert_eq!(next(&p), Some(DELTA + 30_000), "hook cut-off");

    // The hook returns after 10 s.
    assert_eq!(
        p.handle(at(DELTA + 10_000), Input::pre_stop_finished(0))
            .container(),
        Ok(Handled::Applied)
    );
    assert_eq!(drain(&mut p), [term(0)]);
    assert_eq!(p.containers()[0].budget_seconds(), 20);
    assert_eq!(
        p.containers()[0].stop_signal_sent_at().map(rel),
        Some(DELTA + 10_000)
    );
    nothing_before_next(&mut p);
    assert_eq!(advance(&mut p), (DELTA + 30_000, vec![kill(0)]));
    assert_eq!(p.phase(), Phase::Terminating);
    assert_record(&p, Some(30), Some(30), 2);

    // The killed process is reaped; the final delete removes the record.
    assert_eq!(
        p.handle(at(DELTA + 30_100), Input::container_exited(0))
            .container(),
        Ok(Handled::Applied)
    );
    phases.see(&p);
    assert_eq!(drain(&mut p), [gone(0), REMOVE]);
    assert_record(&p, Some(30), Some(0), 2);
    assert_eq!(phases.0, FULL_PATH);
}

// ---- §7.3 ----------------------------------------------------------------------

/// preStop hangs: waited 30 s, timeout max(0, 2) = 2, SIGTERM at +30,
/// SIGKILL at +32.
#[test]
fn timeline_3_pre_stop_hangs() {
    let mut p = pod(&[HOOKED]);
    let mut phases = Phases::start(&p);
    let _ = delete(&mut p, 0, None);
    phases.see(&p);
    assert_eq!(drain(&mut p), [Action::RemoveEndpoints]);

    assert_eq!(
        p.handle(at(DELTA), Input::AgentSync).handled(),
        Handled::Applied
    );
    phases.see(&p);
    assert_eq!(drain(&mut p), [pre_stop(0, 30)]);

    nothing_before_next(&mut p);
    assert_eq!(advance(&mut p), (DELTA + 30_000, vec![term(0)]));
    assert_eq!(p.containers()[0].budget_seconds(), 0);
    nothing_before_next(&mut p);
    assert_eq!(advance(&mut p), (DELTA + 32_000, vec![kill(0)]));
    assert_eq!(p.poll_timeout(), None);
    assert_record(&p, Some(30), Some(30), 2);

    assert_eq!(
        p.handle(at(DELTA + 32_200), Input::container_exited(0))
            .container(),
        Ok(Handled::Applied)
    );
    phases.see(&p);
    assert_eq!(drain(&mut p), [gone(0), REMOVE]);
    // T+32.7 → T+32.
    assert_record(&p, Some(32), Some(0), 2);
    assert_eq!(phases.0, FULL_PATH);
}

// ---- §7.4 ----------------------------------------------------------------------

/// `kubectl delete --grace-period=0 --force`: ts = now, dgps = 0, removed at
/// once (flagged, D4). The reachable kubelet still stops the workload with
/// G = 1: preStop ≤ 1 s, SIGTERM, SIGKILL 2 s later.
#[test]
fn timeline_4_force_delete() {
    let mut p = pod(&[HOOKED]);
    let mut phases = Phases::start(&p);
    let r = delete(&mut p, 0, Some(0));
    assert_eq!(r.outcome, DeleteOutcome::Deleted);
    assert!(r.force);
    phases.see(&p);
    assert!(!p.is_stored());
    assert_record(&p, Some(0), Some(0), 2);
    assert_eq!(
        drain(&mut p),
        [Action::RemoveEndpoints, Action::Remove { force: true }]
    );

    // The agent sees the record gone (dgps 0) ⇒ G = 1.
    assert_eq!(
        p.handle(at(DELTA), Input::AgentSync).handled(),
        Handled::Applied
    );
    assert_eq!(p.agent().remembered_grace, 1);
    assert_eq!(drain(&mut p), [pre_stop(0, 1)]);
    nothing_before_next(&mut p);
    assert_eq!(advance(&mut p), (DELTA + 1_000, vec![term(0)]));
    nothing_before_next(&mut p);
    assert_eq!(advance(&mut p), (DELTA + 3_000, vec![kill(0)]));
    assert_eq!(
        p.handle(at(DELTA + 3_100), Input::container_exited(0))
            .container(),
        Ok(Handled::Applied)
    );
    assert_eq!(drain(&mut p), [gone(0)], "no second removal");
    phases.see(&p);
    // The record never waited: Live straight to Deleted.
    assert_eq!(phases.0, [Phase::Live, Phase::Deleted]);
    assert_record(&p, Some(0), Some(0), 2);
}

// ---- §7.5 ----------------------------------------------------------------------

/// The user shortens 30 → 5 at T+10: ts = (T+30) − 30 + 5 = T+5 < T+10 ⇒
/// clamped to T+10, dgps = 1, kept (R16, R29). The kubelet sees dgps 1 < 30:
/// shortened. Kubernetes restarts the kill with G = 1 (R55): `StopContainer`
/// with max(1, 2) s (R62), SIGKILL at T+10.25+2. grace applies it at once
/// (D5), with no second SIGTERM: SIGKILL at the earlier of the current
/// deadline (T+30.5) and now + max(1, 2) s (T+12.25), as Kubernetes does.
#[test]
fn timeline_5_shortened_after_ten_seconds() {
    let mut p = pod(&[APP]);
    let mut phases = Phases::start(&p);
    let _ = delete(&mut p, 0, None);
    phases.see(&p);
    assert_record(&p, Some(30), Some(30), 2);
    assert_eq!(drain(&mut p), [Action::RemoveEndpoints]);

    assert_eq!(
        p.handle(at(DELTA), Input::AgentSync).handled(),
        Handled::Applied
    );
    phases.see(&p);
    assert_eq!(drain(&mut p), [term(0)]);
    assert_eq!(next(&p), Some(DELTA + 30_000));

    // The shortening, at T+10.
    let r = delete(&mut p, 10_000, Some(5));
    assert_eq!(r.outcome, DeleteOutcome::Graceful);
    assert!(p.is_stored());
    assert_eq!(p.phase(), Phase::Terminating);
    assert_record(&p, Some(10), Some(1), 2);
    assert_eq!(p.record().resource_version, 3);
    assert_eq!(drain(&mut p), [], "already out of endpoints");
    assert_eq!(next(&p), Some(DELTA + 30_000), "the agent has not seen it");

    // The kubelet sees it at T+10.25.
    assert_eq!(
        p.handle(at(10_250), Input::AgentSync).handled(),
        Handled::Applied
    );
    assert_eq!(p.agent().remembered_grace, 1);
    assert_eq!(drain(&mut p), [], "SIGTERM is not sent again");
    assert_eq!(next(&p), Some(12_250));
    nothing_before_next(&mut p);
    assert_eq!(advance(&mut p), (12_250, vec![kill(0)]));

    assert_eq!(
        p.handle(at(12_400), Input::container_exited(0)).container(),
        Ok(Handled::Applied)
    );
    phases.see(&p);
    assert_eq!(drain(&mut p), [gone(0), REMOVE]);
    // R15: T+10 − 1 + 0 = T+9 < T+12.4 ⇒ T+12.
    assert_record(&p, Some(12), Some(0), 2);
    assert_eq!(phases.0, FULL_PATH);
}

/// §7.5 with the hanging preStop of §7.3: the running hook is cut off at
/// now + 1 s and not started again; SIGKILL 2 s after SIGTERM.
#[test]
fn timeline_5_shortened_while_pre_stop_runs() {
    let mut p = pod(&[HOOKED]);
    let mut phases = Phases::start(&p);
    let _ = delete(&mut p, 0, None);
    phases.see(&p);
    assert_eq!(
        p.handle(at(DELTA), Input::AgentSync).handled(),
        Handled::Applied
    );
    phases.see(&p);
    assert_eq!(drain(&mut p), [Action::RemoveEndpoints, pre_stop(0, 30)]);
    assert_eq!(next(&p), Some(DELTA + 30_000));

    let _ = delete(&mut p, 10_000, Some(5));
    assert_record(&p, Some(10), Some(1), 2);
    assert_eq!(
        p.handle(at(10_250), Input::AgentSync).handled(),
        Handled::Applied
    );
    assert_eq!(drain(&mut p), [], "the hook is not started again");
    assert_eq!(
        p.containers()[0].stage(),
        Stage::PreStop {
            cutoff: Instant::from_millis((T_MS + 11_250) as u64)
        }
    );
    assert_eq!(advance(&mut p), (11_250, vec![term(0)]));
    assert_eq!(advance(&mut p), (13_250, vec![kill(0)]));
    assert_eq!(
        p.handle(at(13_300), Input::container_exited(0)).container(),
        Ok(Handled::Applied)
    );
    phases.see(&p);
    assert_eq!(drain(&mut p), [gone(0), REMOVE]);
    assert_record(&p, Some(13), Some(0), 2);
    assert_eq!(phases.0, FULL_PATH);
}
