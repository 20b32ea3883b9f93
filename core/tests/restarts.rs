//! Container restarts as the kubelet does them (R92–R101, D9): which exit is
//! followed by a start, the CrashLoopBackOff waits, and the pod phase. The
//! phase tables reproduce, row by row, the kubelet's own cases for its
//! phase function with each restart policy, with native sidecars, and for a
//! pod whose regular containers have run; the back-off tests reproduce the
//! cases of the client library's back-off (slow doubling, reset, cap).
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::expect_used,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

use grace_core::{
    Action, BACK_OFF_INITIAL, BACK_OFF_MAX, BACK_OFF_RESET, BackOff, CRASH_LOOP_BACK_OFF,
    ContainerSpec, ContainerState, ContainerStatus, DeleteOptions, Duration, Handled, Input,
    Instant, Lifecycle, Name, Now, Phase, PodPhase, Record, RestartPolicy, Stage, Strategy,
    UnknownRestartPolicy, keep_terminal_phase, pod_phase, restarts_after_exit,
};

use ContainerState::{NoStatus, Running, Terminated, Waiting};
use PodPhase::{Failed, Pending, Succeeded};
use RestartPolicy::{Always, Never, OnFailure};

fn at(seconds: u64) -> Instant {
    Instant::from_millis(seconds.saturating_mul(1_000))
}

fn secs(seconds: u64) -> Duration {
    Duration::from_secs(seconds)
}

// ---- R92–R94: which exit is followed by a start -----------------------------

#[test]
fn r92_the_pods_policy_decides_for_regular_containers() {
    // (policy, exit code, starts again)
    let cases = [
        (Always, 0, true),
        (Always, 1, true),
        (Always, -1, true),
        (OnFailure, 0, false),
        (OnFailure, 1, true),
        (OnFailure, 137, true),
        (OnFailure, -1, true),
        (Never, 0, false),
        (Never, 1, false),
    ];
    for (policy, code, expected) in cases {
        assert_eq!(
            restarts_after_exit(policy, false, code, false),
            expected,
            "{policy} exit {code}"
        );
    }
}

#[test]
fn r92_the_policy_defaults_to_always_and_reads_back_from_its_word() {
    assert_eq!(RestartPolicy::default(), Always);
    for policy in [Always, OnFailure, Never] {
        assert_eq!(policy.as_str().parse(), Ok(policy));
        assert_eq!(format!("{policy}"), policy.as_str());
    }
    for word in ["", "always", "Onfailure", "never ", "Sometimes"] {
        assert_eq!(
            word.parse::<RestartPolicy>(),
            Err(UnknownRestartPolicy),
            "{word:?}"
        );
    }
}

#[test]
fn r93_a_native_sidecar_restarts_whatever_the_pods_policy() {
    for policy in [Always, OnFailure, Never] {
        for code in [0, 1, -1] {
            assert!(
                restarts_after_exit(policy, true, code, false),
                "{policy} exit {code}"
            );
        }
    }
}

#[test]
fn r94_nothing_restarts_once_the_pod_is_being_deleted() {
    for policy in [Always, OnFailure, Never] {
        for sidecar in [false, true] {
            for code in [0, 1, 137] {
                assert!(
                    !restarts_after_exit(policy, sidecar, code, true),
                    "{policy} sidecar {sidecar} exit {code}"
                );
            }
        }
    }
}

// ---- R92–R94 in the lifecycle: a container started again ---------------------

fn now(seconds: i64) -> Now {
    Now::from_unix_millis(seconds * 1_000)
}

/// A scheduled pod of one container whose process exited at 100 s (its
/// `ContainerStopped` handed out), waiting out a back-off.
fn exited_pod() -> Lifecycle<4, 2> {
    let record = Record::<4>::new(Name::try_from("uid-1").expect("a name"));
    let app = ContainerSpec {
        pre_stop: true,
        sidecar: false,
        stopped: false,
    };
    let mut pod = Lifecycle::<4, 2>::new(Strategy::POD, record, &[app]).expect("one container");
    pod.handle(now(100), Input::container_exited(0))
        .container()
        .expect("container 0");
    assert_eq!(
        pod.poll_action(),
        Some(Action::ContainerStopped { container: 0 })
    );
    assert_eq!(pod.poll_action(), None, "nothing else: it is not deleted");
    pod
}

#[test]
fn r92_a_container_started_again_runs_and_a_delete_stops_it() {
    let mut pod = exited_pod();
    assert_eq!(
        pod.handle(now(110), Input::container_started(0))
            .container(),
        Ok(Handled::Applied)
    );
    assert_eq!(pod.containers()[0].stage(), Stage::Running);
    // Started twice is once.
    assert_eq!(
        pod.handle(now(111), Input::container_started(0))
            .container(),
        Ok(Handled::Ignored)
    );
    let _ = pod.handle(now(120), Input::Delete(DeleteOptions::default()));
    let _ = pod.handle(now(120), Input::AgentSync);
    let actions: Vec<Action> = core::iter::from_fn(|| pod.poll_action()).collect();
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::RunPreStop { container: 0, .. })),
        "its hook runs, as for any running container: {actions:?}"
    );
    // It exits: stopped once more, then the final delete.
    pod.handle(now(125), Input::container_exited(0))
        .container()
        .expect("container 0");
    assert_eq!(
        pod.poll_action(),
        Some(Action::ContainerStopped { container: 0 })
    );
}

#[test]
fn r94_a_delete_during_the_back_off_signals_nothing_and_ends_at_once() {
    let mut pod = exited_pod();
    let _ = pod.handle(now(105), Input::Delete(DeleteOptions::default()));
    let _ = pod.handle(now(105), Input::AgentSync);
    let actions: Vec<Action> = core::iter::from_fn(|| pod.poll_action()).collect();
    assert_eq!(
        actions,
        [Action::RemoveEndpoints, Action::Remove { force: false }],
        "no hook, no stop signal: no process runs"
    );
    assert_eq!(pod.phase(), Phase::Deleted);
    // The back-off's end finds the pod deleted: nothing starts.
    assert_eq!(
        pod.handle(now(110), Input::container_started(0))
            .container(),
        Ok(Handled::Ignored)
    );
    assert_eq!(pod.containers()[0].stage(), Stage::Stopped);
}

#[test]
fn r94_no_start_once_the_deletion_is_seen_or_the_pod_evicted() {
    // Two containers, the first exited: the second still runs, so the pod
    // stays while it is stopped.
    let two = || {
        let record = Record::<4>::new(Name::try_from("uid-2").expect("a name"));
        let specs = [ContainerSpec::default(), ContainerSpec::default()];
        let mut pod = Lifecycle::<4, 2>::new(Strategy::POD, record, &specs).expect("two");
        pod.handle(now(100), Input::container_exited(0))
            .container()
            .expect("container 0");
        let _ = core::iter::from_fn(|| pod.poll_action()).count();
        pod
    };
    let mut deleted = two();
    let _ = deleted.handle(now(101), Input::Delete(DeleteOptions::default()));
    let _ = deleted.handle(now(101), Input::AgentSync);
    let mut evicted = two();
    let _ = evicted.handle(now(101), Input::evict(30));
    for (what, mut pod) in [("deleted", deleted), ("evicted", evicted)] {
        assert_eq!(
            pod.handle(now(110), Input::container_started(0))
                .container(),
            Ok(Handled::Ignored),
            "{what}"
        );
        assert_eq!(pod.containers()[0].stage(), Stage::Stopped, "{what}");
    }
    // A container that does not exist is an error, as for an exit.
    assert!(
        exited_pod()
            .handle(now(110), Input::container_started(5))
            .container()
            .is_err()
    );
}

// ---- R95–R97, D9: CrashLoopBackOff -------------------------------------------

/// Crashes `back_off`'s container `runs` times, each run lasting
/// `run_for` and each restart at the earliest instant allowed; returns
/// the waits.
fn crash_loop(
    back_off: &mut BackOff,
    mut now: Instant,
    run_for: Duration,
    runs: usize,
) -> Vec<u64> {
    let mut waits = Vec::new();
    for _ in 0..runs {
        let finished = now.saturating_add(run_for);
        let restart = back_off.restart_at(finished);
        waits.push(restart.saturating_duration_since(finished).whole_seconds());
        back_off.restarted(finished, restart);
        now = restart;
    }
    waits
}

#[test]
fn r95_back_off_doubles_from_10_s_to_300_s() {
    // The client library's slow back-off: 10 s doubling, capped at 300 s.
    let mut back_off = BackOff::new();
    let waits = crash_loop(&mut back_off, at(0), secs(1), 9);
    assert_eq!(waits, [10, 20, 40, 80, 160, 300, 300, 300, 300]);
    assert_eq!(BACK_OFF_INITIAL, secs(10));
    assert_eq!(BACK_OFF_MAX, secs(300));
    assert_eq!(CRASH_LOOP_BACK_OFF, "CrashLoopBackOff");
}

#[test]
fn r95_the_wait_counts_from_the_exit() {
    let mut back_off = BackOff::new();
    back_off.restarted(at(100), at(110));
    // The second run exits at 150: the 20 s count from there, not from 110.
    assert_eq!(back_off.delay(at(150)), secs(20));
    assert_eq!(back_off.restart_at(at(150)), at(170));
}

#[test]
fn r95_the_wait_stays_at_the_cap_however_long_the_loop() {
    // The client library's high-water mark: the cap holds for ever.
    let mut back_off = BackOff::new();
    let waits = crash_loop(&mut back_off, at(0), Duration::ZERO, 200);
    assert!(waits.iter().all(|&w| w <= 300));
    assert_eq!(waits.last(), Some(&300));
    // Near the end of time nothing wraps: an exit there (long after the
    // last restart, so the waits start again at 10 s) may restart at the
    // last instant, and the next wait is 20 s.
    let late = Instant::MAX.saturating_sub(secs(5));
    assert_eq!(back_off.restart_at(late), Instant::MAX);
    back_off.restarted(late, Instant::MAX);
    assert_eq!(back_off.delay(Instant::MAX), secs(20));
    assert_eq!(back_off.restart_at(Instant::MAX), Instant::MAX);
}

#[test]
fn r96_an_exit_more_than_600_s_after_the_restart_starts_again_at_10_s() {
    // The client library's reset: the back-off is forgotten after twice its
    // maximum.
    let mut back_off = BackOff::new();
    let waits = crash_loop(&mut back_off, at(0), secs(1), 4);
    assert_eq!(waits, [10, 20, 40, 80]);
    let restarted = at(1 + 10 + 1 + 20 + 1 + 40 + 1 + 80);
    // Exactly 600 s after the restart is not more than 600 s: 160.
    let on_the_edge = restarted.saturating_add(BACK_OFF_RESET);
    assert_eq!(back_off.delay(on_the_edge), secs(160));
    // A millisecond later it is.
    let after = on_the_edge.saturating_add(Duration::from_millis(1));
    assert_eq!(back_off.delay(after), secs(10));
    // Then 20, 40 … again.
    let again = back_off.restart_at(after);
    back_off.restarted(after, again);
    let waits = crash_loop(&mut back_off, again, secs(1), 2);
    assert_eq!(waits, [20, 40]);
}

#[test]
fn r96_the_reset_is_measured_from_the_exit_not_the_start() {
    // The last restart was at 40: an exit at 640 keeps the doubling, one at
    // 641 resets it, whenever the run that exited had begun.
    let mut back_off = BackOff::new();
    back_off.restarted(at(0), at(10));
    back_off.restarted(at(20), at(40));
    assert_eq!(back_off.delay(at(640)), secs(40));
    assert_eq!(back_off.delay(at(641)), secs(10));
}

#[test]
fn d9_the_first_exit_waits_10_s_where_the_kubelet_restarts_at_once() {
    let back_off = BackOff::new();
    assert_eq!(back_off.delay(at(3)), secs(10));
    assert_eq!(back_off.restart_at(at(3)), at(13));
    let mut back_off = back_off;
    back_off.restarted(at(3), at(13));
    back_off.reset();
    assert_eq!(back_off, BackOff::new());
}

#[test]
fn d9_the_back_off_is_sixteen_bytes() {
    assert_eq!(core::mem::size_of::<BackOff>(), 16);
}

// ---- R98–R101: the pod phase ---------------------------------------------------

fn regular(state: ContainerState) -> ContainerStatus {
    ContainerStatus::regular(state)
}
fn sidecar(state: ContainerState) -> ContainerStatus {
    ContainerStatus::sidecar(state)
}

// The kubelet's container states in its phase tests.
const RUNNING: ContainerState = Running { started: false };
const STARTED: ContainerState = Running { started: true };
const WAITING: ContainerState = Waiting { last_exit: None };
const WAITING_AFTER_0: ContainerState = Waiting { last_exit: Some(0) };
const WAITING_AFTER_FAILURE: ContainerState = Waiting {
    last_exit: Some(-1),
};
const SUCCEEDED: ContainerState = Terminated { exit_code: 0 };
const FAILED: ContainerState = Terminated { exit_code: -1 };
// The kubelet's "stopped" is a termination with the exit code left at 0.
const STOPPED: ContainerState = Terminated { exit_code: 0 };

struct Case<'a> {
    what: &'static str,
    containers: &'a [ContainerStatus],
    terminal: bool,
    phase: PodPhase,
}

fn check(policy: RestartPolicy, cases: &[Case<'_>]) {
    for case in cases {
        assert_eq!(
            pod_phase(case.containers, policy, case.terminal),
            case.phase,
            "{policy}: {}",
            case.what
        );
    }
}

const fn case<'a>(
    what: &'static str,
    containers: &'a [ContainerStatus],
    phase: PodPhase,
) -> Case<'a> {
    Case {
        what,
        containers,
        terminal: false,
        phase,
    }
}

const fn terminal<'a>(
    what: &'static str,
    containers: &'a [ContainerStatus],
    phase: PodPhase,
) -> Case<'a> {
    Case {
        what,
        containers,
        terminal: true,
        phase,
    }
}

const fn r(state: ContainerState) -> ContainerStatus {
    ContainerStatus::regular(state)
}
const fn s(state: ContainerState) -> ContainerStatus {
    ContainerStatus::sidecar(state)
}
const NONE: ContainerStatus = r(NoStatus);

#[test]
fn r98_phase_with_restart_always() {
    use PodPhase::Running;
    check(
        Always,
        &[
            case("no status yet", &[NONE, NONE], Pending),
            case("both running", &[r(RUNNING), r(RUNNING)], Running),
            case(
                "both exited: being restarted",
                &[r(STOPPED), r(STOPPED)],
                Running,
            ),
            terminal(
                "both succeeded, pod terminal",
                &[r(SUCCEEDED), r(SUCCEEDED)],
                Succeeded,
            ),
            terminal(
                "one failed, pod terminal",
                &[r(SUCCEEDED), r(FAILED)],
                Failed,
            ),
            case(
                "one running, one exited",
                &[r(RUNNING), r(STOPPED)],
                Running,
            ),
            case(
                "one running, one without status",
                &[r(RUNNING), NONE],
                Pending,
            ),
            case(
                "one running, one waiting",
                &[r(RUNNING), r(WAITING)],
                Pending,
            ),
            case(
                "one running, one in back-off",
                &[r(RUNNING), r(WAITING_AFTER_0)],
                Running,
            ),
        ],
    );
}

#[test]
fn r98_phase_with_restart_never() {
    use PodPhase::Running;
    check(
        Never,
        &[
            case("no status yet", &[NONE, NONE], Pending),
            case("both running", &[r(RUNNING), r(RUNNING)], Running),
            case("both succeeded", &[r(SUCCEEDED), r(SUCCEEDED)], Succeeded),
            case("both failed", &[r(FAILED), r(FAILED)], Failed),
            case(
                "one running, one succeeded",
                &[r(RUNNING), r(SUCCEEDED)],
                Running,
            ),
            case(
                "one running, one without status",
                &[r(RUNNING), NONE],
                Pending,
            ),
            case(
                "one running, one waiting",
                &[r(RUNNING), r(WAITING)],
                Pending,
            ),
        ],
    );
}

#[test]
fn r98_phase_with_restart_on_failure() {
    use PodPhase::Running;
    check(
        OnFailure,
        &[
            case("no status yet", &[NONE, NONE], Pending),
            case("both running", &[r(RUNNING), r(RUNNING)], Running),
            case("both succeeded", &[r(SUCCEEDED), r(SUCCEEDED)], Succeeded),
            case(
                "both failed: being restarted",
                &[r(FAILED), r(FAILED)],
                Running,
            ),
            case(
                "one running, one succeeded",
                &[r(RUNNING), r(SUCCEEDED)],
                Running,
            ),
            case(
                "one running, one without status",
                &[r(RUNNING), NONE],
                Pending,
            ),
            case(
                "one running, one waiting",
                &[r(RUNNING), r(WAITING)],
                Pending,
            ),
            terminal(
                "one failed, pod terminal",
                &[r(SUCCEEDED), r(FAILED)],
                Failed,
            ),
        ],
    );
}

#[test]
fn r98_a_container_waiting_after_a_run_counts_as_exited_but_not_as_a_success() {
    // Under Never, nothing restarts it; its wait is a failure whatever its
    // last exit code.
    let containers = [regular(SUCCEEDED), regular(WAITING_AFTER_0)];
    assert_eq!(pod_phase(&containers, Never, false), Failed);
    assert_eq!(pod_phase(&containers, Always, false), PodPhase::Running);
}

#[test]
fn r99_phase_with_restart_always_and_native_sidecars() {
    use PodPhase::Running;
    check(
        Always,
        &[
            case("no status yet", &[NONE, NONE, NONE], Pending),
            case("sidecar running", &[s(RUNNING), NONE, NONE], Pending),
            case("sidecar exited", &[s(STOPPED), NONE, NONE], Pending),
            case(
                "sidecar in back-off after 0",
                &[s(WAITING_AFTER_0), NONE, NONE],
                Pending,
            ),
            case(
                "sidecar in back-off after a failure",
                &[s(WAITING_AFTER_FAILURE), NONE, NONE],
                Pending,
            ),
            case("sidecar waiting", &[s(WAITING), NONE, NONE], Pending),
            case(
                "sidecar started, one of two running",
                &[s(STARTED), r(RUNNING), NONE],
                Pending,
            ),
            case(
                "sidecar started, both running",
                &[s(STARTED), r(RUNNING), r(RUNNING)],
                Running,
            ),
            case(
                "sidecar running but not started, both running",
                &[s(RUNNING), r(RUNNING), r(RUNNING)],
                Running,
            ),
            case(
                "sidecar exited, both running",
                &[s(STOPPED), r(RUNNING), r(RUNNING)],
                Running,
            ),
            case(
                "sidecar in back-off, both running",
                &[s(WAITING_AFTER_0), r(RUNNING), r(RUNNING)],
                Running,
            ),
            terminal(
                "sidecar failed, both succeeded, pod terminal",
                &[s(FAILED), r(SUCCEEDED), r(SUCCEEDED)],
                Succeeded,
            ),
            terminal(
                "sidecar succeeded, both succeeded, pod terminal",
                &[s(SUCCEEDED), r(SUCCEEDED), r(SUCCEEDED)],
                Succeeded,
            ),
        ],
    );
}

#[test]
fn r99_phase_with_restart_never_and_native_sidecars() {
    use PodPhase::Running;
    check(
        Never,
        &[
            case("no status yet", &[NONE, NONE, NONE], Pending),
            case("sidecar running", &[s(RUNNING), NONE, NONE], Pending),
            case("sidecar exited", &[s(STOPPED), NONE, NONE], Pending),
            case(
                "sidecar in back-off after 0",
                &[s(WAITING_AFTER_0), NONE, NONE],
                Pending,
            ),
            case(
                "sidecar in back-off after a failure",
                &[s(WAITING_AFTER_FAILURE), NONE, NONE],
                Pending,
            ),
            case("sidecar waiting", &[s(WAITING), NONE, NONE], Pending),
            case(
                "sidecar started, one of two running",
                &[s(STARTED), r(RUNNING), NONE],
                Pending,
            ),
            // A running sidecar keeps the pod Running after its main
            // containers succeeded: it will be stopped, not left.
            case(
                "sidecar started, both succeeded",
                &[s(STARTED), r(SUCCEEDED), r(SUCCEEDED)],
                Running,
            ),
            case(
                "sidecar running, both succeeded",
                &[s(RUNNING), r(SUCCEEDED), r(SUCCEEDED)],
                Running,
            ),
            case(
                "sidecar exited 0, both succeeded",
                &[s(SUCCEEDED), r(SUCCEEDED), r(SUCCEEDED)],
                Succeeded,
            ),
            case(
                "sidecar failed, both succeeded",
                &[s(FAILED), r(SUCCEEDED), r(SUCCEEDED)],
                Succeeded,
            ),
            case(
                "sidecar in back-off after 0, both succeeded",
                &[s(WAITING_AFTER_0), r(SUCCEEDED), r(SUCCEEDED)],
                Succeeded,
            ),
            case(
                "sidecar in back-off after a failure, both succeeded",
                &[s(WAITING_AFTER_FAILURE), r(SUCCEEDED), r(SUCCEEDED)],
                Succeeded,
            ),
        ],
    );
}

#[test]
fn r99_a_restarting_sidecar_does_not_send_a_pod_that_has_run_back_to_pending() {
    // The kubelet's cases for a pod whose regular containers have run, past
    // its (regular) init container, which grace does not model.
    use PodPhase::Running;
    check(
        Always,
        &[
            case(
                "sidecar running, main exited",
                &[s(RUNNING), r(STOPPED)],
                Running,
            ),
            case(
                "sidecar running, main running",
                &[s(RUNNING), r(RUNNING)],
                Running,
            ),
            // The sidecar restarts (running, not yet started) while the main
            // container runs: still Running.
            case(
                "sidecar restarting, main running",
                &[s(RUNNING), r(STARTED)],
                Running,
            ),
            // Before any main container ran, the same sidecar holds Pending.
            case(
                "sidecar restarting, main waiting",
                &[s(RUNNING), r(WAITING)],
                Pending,
            ),
        ],
    );
}

#[test]
fn r100_a_terminal_pod_is_succeeded_or_failed_whatever_its_policy() {
    for policy in [Always, OnFailure, Never] {
        let ok = [regular(SUCCEEDED), sidecar(FAILED)];
        assert_eq!(pod_phase(&ok, policy, true), Succeeded, "{policy}");
        let failed = [regular(SUCCEEDED), regular(WAITING_AFTER_0)];
        assert_eq!(pod_phase(&failed, policy, true), Failed, "{policy}");
        // A container still running keeps it Running until it has stopped.
        let running = [regular(SUCCEEDED), regular(RUNNING)];
        assert_eq!(
            pod_phase(&running, policy, true),
            PodPhase::Running,
            "{policy}"
        );
    }
}

#[test]
fn r101_a_phase_never_leaves_succeeded_or_failed() {
    let all = [
        Pending,
        PodPhase::Running,
        Succeeded,
        Failed,
        PodPhase::Unknown,
        PodPhase::Unset,
    ];
    for previous in all {
        for computed in all {
            let kept = keep_terminal_phase(previous, computed);
            if previous.is_terminal() {
                assert_eq!(kept, previous, "{previous:?} then {computed:?}");
            } else {
                assert_eq!(kept, computed, "{previous:?} then {computed:?}");
            }
        }
    }
}

#[test]
fn r98_no_containers_is_pending() {
    assert_eq!(pod_phase(&[], Always, false), Pending);
    assert_eq!(pod_phase(&[], Never, true), Pending);
}
