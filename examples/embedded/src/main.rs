//! grace-core on a microcontroller: four pods deleted gracefully on a
//! Cortex-M4 (QEMU `mps2-an386`), deadlines driven by a 1 kHz SysTick, every
//! step logged with defmt over semihosting.
//!
//! There are no real processes on this board, so the program also plays the
//! node agent (it notices a deletion 500 ms after it is made, and the grace
//! counts from there) and the workloads. Times are milliseconds since boot;
//! all three pods are deleted at t = 0.
//!
//! | pod      | grace | workload                     | expected                                             |
//! |----------|-------|------------------------------|------------------------------------------------------|
//! | web      | 2 s   | exits 1 s after SIGTERM      | SIGTERM at 500, exits and is deleted at 1500         |
//! | stubborn | 3 s   | ignores SIGTERM              | SIGTERM at 500, SIGKILL at 3500 (500 + grace)        |
//! | hook     | 2 s   | pre-stop hook hangs; stuck   | hook at 500, SIGTERM at 2500 (budget spent), SIGKILL at 4500 (+2 s floor, R62) |
//! | forced   | 0     | ignores SIGTERM              | record removed at 0 (force); SIGTERM at 500, SIGKILL at 2500; forgotten only then |
//!
//! The board forgets an object (frees its slot) only once it is finished
//! ([`grace_core::Lifecycle::is_finished`]), never on `Remove` alone: the
//! decisions are in `world.rs`, which a host test drives too.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m::peripheral::{SYST, syst::SystClkSource};
use cortex_m_rt::{entry, exception};
use cortex_m_semihosting::debug;
use defmt::{error, info};
use defmt_semihosting as _; // the global logger: defmt frames to QEMU's stdout
use grace_core::Input;
use grace_core::{
    Action, ContainerSpec, DeleteOptions, InlineName, Instant, Lifecycle, Now, Record,
    SMALL_NAME_CAPACITY, SharedTable, Strategy, WallTime,
};
use world::{Event, Pod, Spec};

mod world;

/// Up to 4 objects, each with room for 2 finalizers and 1 container, with
/// names of up to 62 bytes (a name then takes 64; the default capacity
/// holds any Kubernetes name, in 319); in a `static` so that interrupt
/// handlers (a UART taking delete requests, say) could share it with
/// `main`; every access is a short critical section.
static TABLE: SharedTable<4, 2, 1, SMALL_NAME_CAPACITY> = SharedTable::new();

/// How long the node agent takes to notice a deletion.
const AGENT_DELAY_MS: u64 = 500;
/// Nothing in this story runs past 5 s; a bug that stalls fails the run.
const GIVE_UP_MS: u64 = 10_000;
/// mps2-an386's CPU clock, which drives SysTick.
const CPU_HZ: u32 = 25_000_000;

const SPECS: [Spec; 4] = [
    Spec {
        name: "web",
        grace: 2,
        pre_stop: false,
        exits_after_sigterm_ms: Some(1_000),
    },
    Spec {
        name: "stubborn",
        grace: 3,
        pre_stop: false,
        exits_after_sigterm_ms: None,
    },
    // The hook hangs past its budget and never reports back; the process is
    // stuck in it and ignores SIGTERM.
    Spec {
        name: "hook",
        grace: 2,
        pre_stop: true,
        exits_after_sigterm_ms: None,
    },
    // A force delete: the record goes at once, the kill still has to run
    // (D4); the board must not drop it on `Remove`.
    Spec {
        name: "forced",
        grace: 0,
        pre_stop: false,
        exits_after_sigterm_ms: None,
    },
];

// ---- the clock: SysTick at 1 kHz, read through embassy-time ---------------

/// Milliseconds since boot. 32 bits wrap after 49 days; fine for a demo that
/// lasts 5 s (a real firmware would extend it to 64 bits).
static TICKS: AtomicU32 = AtomicU32::new(0);

#[exception]
fn SysTick() {
    TICKS.fetch_add(1, Ordering::Relaxed);
}

struct SysTickDriver;

impl embassy_time_driver::Driver for SysTickDriver {
    fn now(&self) -> u64 {
        u64::from(TICKS.load(Ordering::Relaxed))
    }
    // Nothing here awaits an embassy Timer; waking at once keeps one correct
    // (it re-polls) should anything ever use it.
    fn schedule_wake(&self, _at: u64, waker: &core::task::Waker) {
        waker.wake_by_ref();
    }
}

embassy_time_driver::time_driver_impl!(static DRIVER: SysTickDriver = SysTickDriver);

fn start_clock(mut syst: SYST) {
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(CPU_HZ / 1_000 - 1);
    syst.clear_current();
    syst.enable_interrupt();
    syst.enable_counter();
}

/// The time for grace. The monotonic clock comes from embassy-time (the
/// `embassy-time` feature converts it); with no RTC on this board the wall
/// clock is the same count, so deletion timestamps read as seconds since boot.
fn now() -> Now {
    let mono = Instant::from(embassy_time::Instant::now());
    Now::new(WallTime::from_unix_millis(mono.as_millis() as i64), mono)
}

/// Sleeps until `deadline`. The check and the WFI run with interrupts masked,
/// so a tick landing between them cannot be slept through (WFI still wakes
/// on a pending interrupt; the handler runs once they are unmasked).
fn sleep_until(deadline: Instant) {
    while !cortex_m::interrupt::free(|_| {
        let due = now().mono >= deadline;
        if !due {
            cortex_m::asm::wfi();
        }
        due
    }) {}
}

// ---- the program -----------------------------------------------------------

#[entry]
fn main() -> ! {
    let peripherals = (cortex_m::Peripherals::take()).or_fail();
    info!(
        "grace-core on a Cortex-M4: 4 pods, grace 2/3/2/0 s, agent delay {=u64} ms",
        AGENT_DELAY_MS
    );
    start_clock(peripherals.SYST);

    // Everything at t = 0 happens at one instant: read the clock once.
    let t0 = now();
    let mut pods = SPECS.each_ref().map(|spec| create(t0, spec));
    for i in 0..pods.len() {
        delete(t0, &mut pods, i);
    }

    loop {
        let now = now();
        let ms = now.mono.as_millis();

        // Deadlines that have passed: hook cut-offs, SIGKILLs.
        (TABLE.with(|t| t.handle_timeouts(now))).or_fail();
        settle(now, &mut pods);

        // What the world does by now. A reaction can be due at once (a
        // SIGKILLed process exits), so repeat until nothing is due.
        while let Some(i) = pods
            .iter()
            .position(|p| p.event.is_some_and(|(at, _)| at <= ms))
        {
            let pod = &mut pods[i];
            let (id, name) = (pod.id, pod.spec.name);
            match pod.event.take() {
                Some((_, Event::AgentSync)) => {
                    info!("t={=u64} ms {=str}: agent sees the deletion", ms, name);
                    let _ = (TABLE.with(|t| t.handle(now, id, Input::AgentSync))).or_fail();
                }
                Some((_, Event::Exit)) => {
                    info!("t={=u64} ms {=str}: process exits", ms, name);
                    let _ = ((TABLE.with(|t| t.handle(now, id, Input::container_exited(0)))).or_fail())
                        .or_fail();
                }
                None => {}
            }
            settle(now, &mut pods);
        }

        if pods.iter().all(|p| p.forgotten) {
            let left = (TABLE.with(|t| t.len())).or_fail();
            info!(
                "t={=u64} ms: all pods finished, {=usize} objects left in the table",
                ms, left
            );
            exit(debug::EXIT_SUCCESS);
        }

        // Sleep until the earliest of the table's deadline and the world's
        // next event.
        let deadline = (TABLE.with(|t| t.poll_timeout()))
            .or_fail()
            .map(Instant::as_millis);
        let event = pods.iter().filter_map(|p| p.event.map(|(at, _)| at)).min();
        let next = match (deadline, event) {
            (Some(d), Some(e)) => d.min(e),
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => fail(ms, "nothing left to wait for, yet not all deleted"),
        };
        if next > GIVE_UP_MS {
            fail(ms, "the story should be over by now");
        }
        info!("t={=u64} ms: idle until t={=u64} ms", ms, next);
        sleep_until(Instant::from_millis(next));
    }
}

/// Puts a live, running pod with one container into the table.
fn create(now: Now, spec: &'static Spec) -> Pod {
    let uid = (InlineName::try_from(spec.name)).or_fail();
    let record = Record::new(uid);
    let container = ContainerSpec {
        pre_stop: spec.pre_stop,
        ..ContainerSpec::default()
    };
    let lifecycle = (Lifecycle::new(Strategy::POD, record, &[container])).or_fail();
    let phase = lifecycle.phase();
    let id = ((TABLE.with(|t| t.insert(lifecycle).ok())).or_fail()).or_fail();
    info!(
        "t={=u64} ms {=str}: created, phase {}",
        now.mono.as_millis(),
        spec.name,
        phase
    );
    Pod {
        spec,
        id,
        phase,
        event: None,
        forgotten: false,
    }
}

/// `kubectl delete pod NAME --grace-period=G`; the agent notices later.
fn delete(now: Now, pods: &mut [Pod], i: usize) {
    let pod = &mut pods[i];
    let (id, ms) = (pod.id, now.mono.as_millis());
    let options = DeleteOptions::with_grace(pod.spec.grace);
    // The response is small; the object as written is the table's record.
    let at = ((TABLE.with(|t| {
        t.handle(now, id, Input::Delete(options.clone())).map(|_| {
            t.get(id)
                .and_then(|l| l.record().deletion_timestamp)
                .map_or(-1, |ts| ts.as_unix_seconds())
        })
    }))
    .or_fail())
    .or_fail();
    info!(
        "t={=u64} ms {=str}: delete, grace {=i64} s, deletion timestamp {=i64} s",
        ms, pod.spec.name, pod.spec.grace, at
    );
    pod.event = Some((ms + AGENT_DELAY_MS, Event::AgentSync));
    settle(now, pods);
}

/// After every input: log phase changes, then carry out what the table owes,
/// in its order, with the workloads' reactions.
fn settle(now: Now, pods: &mut [Pod]) {
    let ms = now.mono.as_millis();
    for pod in pods.iter_mut() {
        let phase = (TABLE.with(|t| t.get(pod.id).map(Lifecycle::phase))).or_fail();
        if let Some(phase) = phase
            && phase != pod.phase
        {
            info!(
                "t={=u64} ms {=str}: phase {} -> {}",
                ms, pod.spec.name, pod.phase, phase
            );
            pod.phase = phase;
        }
    }

    // Each poll is its own critical section, which also reads the object's
    // next deadline as the action just set it; logging happens outside.
    while let Some((id, action, due)) = (TABLE.with(|t| {
        t.poll_action()
            .map(|(id, action)| (id, action, t.get(id).and_then(Lifecycle::poll_timeout)))
    }))
    .or_fail()
    {
        let Some(pod) = pods.iter_mut().find(|p| p.id == id) else {
            continue;
        };
        let name = pod.spec.name;
        let due = due.map_or(0, Instant::as_millis);
        match action {
            Action::RemoveEndpoints => {
                info!("t={=u64} ms {=str}: action remove from endpoints", ms, name);
            }
            Action::RunPreStop { budget_seconds, .. } => {
                // The hook hangs: it never reports back; the cut-off ends the wait.
                info!(
                    "t={=u64} ms {=str}: action run pre-stop hook, budget {=u32} s, cut-off at t={=u64} ms",
                    ms, name, budget_seconds, due
                );
            }
            Action::SendStopSignal { .. } => {
                info!(
                    "t={=u64} ms {=str}: action SIGTERM, SIGKILL due at t={=u64} ms",
                    ms, name, due
                );
                if pod.spec.exits_after_sigterm_ms.is_none() {
                    info!("t={=u64} ms {=str}: process ignores SIGTERM", ms, name);
                }
            }
            Action::SendKill { .. } => {
                info!("t={=u64} ms {=str}: action SIGKILL", ms, name);
            }
            Action::ContainerStopped { .. } => {
                info!("t={=u64} ms {=str}: action container stopped", ms, name);
            }
            Action::Remove { force } => {
                // The record's end, not the object's: after a force delete
                // the kill goes on, so the slot is freed only once finished.
                info!(
                    "t={=u64} ms {=str}: action remove record (force: {=bool})",
                    ms, name, force
                );
            }
            // An action added to the core later: this board does nothing.
            _ => info!(
                "t={=u64} ms {=str}: an action this board does not know",
                ms, name
            ),
        }
        world::carry_out(pod, action, ms);
    }

    for pod in pods.iter_mut().filter(|p| !p.forgotten) {
        if (TABLE.with(|t| world::forget_if_finished(t, pod))).or_fail() {
            info!(
                "t={=u64} ms {=str}: finished, slot freed",
                ms, pod.spec.name
            );
        }
    }
}

/// `unwrap` with one shared failure path: defmt's `unwrap!` logs each call
/// site's expression and location, which costs `.text` at every use for
/// failures this story never has.
trait OrFail<T> {
    fn or_fail(self) -> T;
}

impl<T, E> OrFail<T> for Result<T, E> {
    #[inline(always)]
    fn or_fail(self) -> T {
        match self {
            Ok(value) => value,
            Err(_) => unwrap_failed(),
        }
    }
}

impl<T> OrFail<T> for Option<T> {
    #[inline(always)]
    fn or_fail(self) -> T {
        match self {
            Some(value) => value,
            None => unwrap_failed(),
        }
    }
}

#[cold]
#[inline(never)]
fn unwrap_failed() -> ! {
    error!("unwrap failed");
    exit(debug::EXIT_FAILURE)
}

fn fail(ms: u64, why: &str) -> ! {
    error!("t={=u64} ms: {=str}", ms, why);
    exit(debug::EXIT_FAILURE)
}

/// Ends the QEMU run with `status` (semihosting SYS_EXIT).
fn exit(status: debug::ExitStatus) -> ! {
    debug::exit(status);
    // Only reached without a semihosting host (a real board, no debugger).
    loop {
        cortex_m::asm::wfi();
    }
}

/// Fails the QEMU run. Nothing here panics by design (every `unwrap!`
/// guards an invariant of the story); printing the location or message
/// would cost about 100 bytes of `.text` for a case that does not occur.
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    error!("panicked");
    exit(debug::EXIT_FAILURE)
}
