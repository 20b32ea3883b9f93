//! grace-core on a microcontroller: three pods deleted gracefully on a
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
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m::peripheral::{SYST, syst::SystClkSource};
use cortex_m_rt::{entry, exception};
use cortex_m_semihosting::debug;
use defmt::{error, info, unwrap};
use defmt_semihosting as _; // the global logger: defmt frames to QEMU's stdout
use grace_core::{
    Action, ContainerSpec, DeleteOptions, Id, InlineName, Instant, Lifecycle, Now, Phase, Record,
    SMALL_NAME_CAPACITY, SharedTable, Strategy, WallTime,
};

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

/// One pod, as the scenario defines it.
struct Spec {
    name: &'static str,
    grace: i64,
    pre_stop: bool,
    /// The process exits this long after SIGTERM; `None`: it ignores SIGTERM.
    exits_after_sigterm_ms: Option<u64>,
}

const SPECS: [Spec; 3] = [
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
];

/// One pod at run time: its id in the table, the last phase logged, and the
/// next thing the outside world does to it.
struct Pod {
    spec: &'static Spec,
    id: Id,
    phase: Phase,
    event: Option<(u64, Event)>,
}

#[derive(Clone, Copy)]
enum Event {
    /// The node agent sees the deletion and starts the kill.
    AgentSync,
    /// The container's process exits.
    Exit,
}

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
    let peripherals = unwrap!(cortex_m::Peripherals::take());
    info!(
        "grace-core on a Cortex-M4: 3 pods, grace 2/3/2 s, agent delay {=u64} ms",
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
        unwrap!(TABLE.with(|t| t.handle_timeout(now)));
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
                    let _ = unwrap!(TABLE.with(|t| t.handle_agent_sync(now, id)));
                }
                Some((_, Event::Exit)) => {
                    info!("t={=u64} ms {=str}: process exits", ms, name);
                    let _ = unwrap!(unwrap!(
                        TABLE.with(|t| t.handle_container_exited(now, id, 0))
                    ));
                }
                None => {}
            }
            settle(now, &mut pods);
        }

        if pods.iter().all(|p| p.phase == Phase::Deleted) {
            let left = unwrap!(TABLE.with(|t| t.len()));
            info!(
                "t={=u64} ms: all pods deleted, {=usize} objects left in the table",
                ms, left
            );
            exit(debug::EXIT_SUCCESS);
        }

        // Sleep until the earliest of the table's deadline and the world's
        // next event.
        let deadline = unwrap!(TABLE.with(|t| t.poll_timeout())).map(Instant::as_millis);
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
    let uid = unwrap!(InlineName::try_from(spec.name));
    let record = Record::new(uid);
    let container = ContainerSpec {
        pre_stop: spec.pre_stop,
        ..ContainerSpec::default()
    };
    let lifecycle = unwrap!(Lifecycle::new(Strategy::POD, record, &[container]));
    let id = unwrap!(TABLE.with(|t| t.insert(lifecycle).ok()));
    let id = unwrap!(id, "table full");
    let phase = unwrap!(TABLE.with(|t| t.get(id).map(Lifecycle::phase)));
    let phase = unwrap!(phase);
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
    }
}

/// `kubectl delete pod NAME --grace-period=G`; the agent notices later.
fn delete(now: Now, pods: &mut [Pod], i: usize) {
    let pod = &mut pods[i];
    let (id, ms) = (pod.id, now.mono.as_millis());
    let options = DeleteOptions::with_grace(pod.spec.grace);
    // The response is small; the object as written is the table's record.
    let at = unwrap!(unwrap!(TABLE.with(|t| {
        t.handle_delete(now, id, &options).map(|_| {
            t.get(id)
                .and_then(|l| l.record().deletion_timestamp)
                .map_or(-1, |ts| ts.as_unix_seconds())
        })
    })));
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
        let phase = unwrap!(TABLE.with(|t| t.get(pod.id).map(Lifecycle::phase)));
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

    // Each poll is its own critical section: logging happens outside them.
    while let Some((id, action)) = unwrap!(TABLE.with(|t| t.poll_action())) {
        let Some(pod) = pods.iter_mut().find(|p| p.id == id) else {
            continue;
        };
        let name = pod.spec.name;
        // The object's next deadline, as the action just set it.
        let due = unwrap!(TABLE.with(|t| t.get(id).and_then(Lifecycle::poll_timeout)))
            .map_or(0, Instant::as_millis);
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
                match pod.spec.exits_after_sigterm_ms {
                    Some(after) => pod.event = Some((ms + after, Event::Exit)),
                    None => info!("t={=u64} ms {=str}: process ignores SIGTERM", ms, name),
                }
            }
            Action::SendKill { .. } => {
                info!("t={=u64} ms {=str}: action SIGKILL", ms, name);
                // SIGKILL cannot be ignored: the process is gone at once.
                pod.event = Some((ms, Event::Exit));
            }
            Action::ContainerStopped { .. } => {
                info!("t={=u64} ms {=str}: action container stopped", ms, name);
            }
            Action::Remove { force } => {
                // The table is this board's storage: removing the record
                // frees the slot.
                unwrap!(TABLE.with(|t| t.remove(id)));
                info!(
                    "t={=u64} ms {=str}: action remove record (force: {=bool})",
                    ms, name, force
                );
            }
            // An action added to the core later: this board does nothing.
            _ => info!("t={=u64} ms {=str}: action {}", ms, name, action),
        }
    }
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

/// Prints where it panicked (not the message: that would pull in core::fmt)
/// and fails the QEMU run.
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    match info.location() {
        Some(at) => error!("panicked at {=str}:{=u32}", at.file(), at.line()),
        None => error!("panicked"),
    }
    exit(debug::EXIT_FAILURE)
}
