//! grace-core's embassy driver on a Cortex-M4 (QEMU `mps2-an386`): the
//! driver task sleeps with embassy-time until the next deadline or the next
//! input; inputs come from a task (a console and the node agent) and from an
//! interrupt (a CMSDK timer standing in for a UART that receives a command);
//! every step is logged with defmt over semihosting.
//!
//! | t (ms) | from            | what                                                        |
//! |--------|-----------------|-------------------------------------------------------------|
//! | 0      | console task    | delete `web`, grace 2 s                                     |
//! | 300    | timer interrupt | force delete `valve` (grace 0): record removed, kill to run |
//! | 500    | agent task      | syncs both: SIGTERM, SIGKILL due at 2500                    |
//! | 501    | driver          | the SIGTERMs reported sent (R62): SIGKILL moves to 2501     |
//! | 1500   | workload task   | `web` exits 1 s after SIGTERM: finished, slot freed         |
//! | 2501   | deadline        | SIGKILL `valve`; it exits: finished, slot freed             |
//!
//! The driver forgets `valve` only once its kill has ended, not when its
//! record is removed at 300 ms (D4).
#![no_std]
#![no_main]

use core::cell::RefCell;
use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m::interrupt::InterruptNumber;
use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::{NVIC, SYST};
use cortex_m_rt::exception;
use cortex_m_semihosting::debug;
use defmt::{error, info, unwrap};
use defmt_semihosting as _; // the global logger: defmt frames to QEMU's stdout
use embassy_executor::Spawner;
use embassy_futures::select::{Either, select};
use embassy_sync::blocking_mutex::raw::CriticalSectionRawMutex;
use embassy_sync::channel::Channel;
use embassy_time::{Duration, Instant as Clock, Timer};
use embassy_time_queue_utils::Queue;
use grace_core::driver::{Answer, Command, Driver, Firmware};
use grace_core::{
    Action, ContainerSpec, DeleteOptions, Id, InlineName, Input, Lifecycle, Phase, Record, Reply,
    SMALL_NAME_CAPACITY, SharedTable, Strategy,
};

/// Names of up to 62 bytes (64 in memory), as on the synchronous example:
/// the default capacity holds any Kubernetes name in 319.
const L: usize = SMALL_NAME_CAPACITY;

/// Up to 4 objects, 2 finalizers and 1 container each; shared by the
/// driver task and whoever inserts objects.
static TABLE: SharedTable<4, 2, 1, L> = SharedTable::new();
/// The driver's inputs, from tasks and from interrupt handlers.
static INPUTS: Channel<CriticalSectionRawMutex, Command, 8> = Channel::new();
/// Signals from the firmware to the workloads: (pod index, SIGKILL?).
static SIGNALS: Channel<CriticalSectionRawMutex, (usize, bool), 4> = Channel::new();
/// The pods' ids, set once at start (the interrupt reads `valve`'s).
static IDS: critical_section::Mutex<RefCell<[Option<Id>; 2]>> =
    critical_section::Mutex::new(RefCell::new([None; 2]));

const NAMES: [&str; 2] = ["web", "valve"];
const WEB: usize = 0;
const VALVE: usize = 1;
/// When the "UART" command arrives.
const UART_AT_MS: u32 = 300;
/// When the agent syncs.
const AGENT_AT_MS: u64 = 500;
/// Nothing in this story runs past 3 s; a stall fails the run.
const GIVE_UP_MS: u64 = 10_000;
/// mps2-an386's CPU and peripheral clock.
const CPU_HZ: u32 = 25_000_000;

// ---- the clock: SysTick at 1 kHz with the executor's timer queue ---------

static TICKS: AtomicU32 = AtomicU32::new(0);
static QUEUE: critical_section::Mutex<RefCell<Queue>> =
    critical_section::Mutex::new(RefCell::new(Queue::new()));

struct SysTickDriver;

impl embassy_time_driver::Driver for SysTickDriver {
    fn now(&self) -> u64 {
        u64::from(TICKS.load(Ordering::Relaxed))
    }

    fn schedule_wake(&self, at: u64, waker: &core::task::Waker) {
        critical_section::with(|cs| {
            let mut queue = QUEUE.borrow_ref_mut(cs);
            queue.schedule_wake(at, waker);
            // Already due: wake now rather than at the next tick.
            queue.next_expiration(self.now());
        });
    }
}

embassy_time_driver::time_driver_impl!(static DRIVER: SysTickDriver = SysTickDriver);

#[exception]
fn SysTick() {
    let now = TICKS.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
    critical_section::with(|cs| {
        QUEUE.borrow_ref_mut(cs).next_expiration(u64::from(now));
    });
}

fn start_clock(mut syst: SYST) {
    syst.set_clock_source(SystClkSource::Core);
    syst.set_reload(CPU_HZ / 1_000 - 1);
    syst.clear_current();
    syst.enable_interrupt();
    syst.enable_counter();
}

fn ms() -> u64 {
    Clock::now().as_millis()
}

// ---- the "UART": CMSDK APB timer 0, one shot -----------------------------

/// CMSDK APB timer 0 on mps2-an386: registers and its interrupt line.
const TIMER0: usize = 0x4000_0000;
const TIMER0_IRQ: u16 = 8;

#[derive(Clone, Copy)]
struct Irq(u16);

// SAFETY: 8 is TIMER0's line on mps2-an385/an386.
unsafe impl InterruptNumber for Irq {
    fn number(self) -> u16 {
        self.0
    }
}

fn timer0(offset: usize) -> *mut u32 {
    (TIMER0 + offset) as *mut u32
}

/// Fires TIMER0's interrupt once, `after_ms` from now.
fn start_uart_stand_in(after_ms: u32) {
    let ticks = CPU_HZ / 1_000 * after_ms;
    // SAFETY: TIMER0's documented registers (CTRL 0x0, VALUE 0x4, RELOAD
    // 0x8), nothing else uses them; volatile MMIO writes.
    unsafe {
        timer0(0x8).write_volatile(ticks);
        timer0(0x4).write_volatile(ticks);
        // Enable, with its interrupt.
        timer0(0x0).write_volatile(0b1001);
        NVIC::unmask(Irq(TIMER0_IRQ));
    }
}

/// Every interrupt without its own handler lands here; TIMER0's is the
/// "UART" receiving `delete pod valve --grace-period=0`.
#[exception]
unsafe fn DefaultHandler(irqn: i16) {
    if irqn != TIMER0_IRQ as i16 {
        error!("unexpected interrupt {=i16}", irqn);
        exit(debug::EXIT_FAILURE);
    }
    // SAFETY: as in `start_uart_stand_in`: stop the timer (one shot) and
    // clear its interrupt (INTCLEAR 0xC).
    unsafe {
        timer0(0x0).write_volatile(0);
        timer0(0xC).write_volatile(1);
    }
    let valve = critical_section::with(|cs| IDS.borrow_ref(cs)[VALVE]);
    if let Some(id) = valve {
        info!("t={=u64} ms uart: delete pod valve --grace-period=0", ms());
        let options = DeleteOptions::with_grace(0);
        // From an interrupt: never wait; a full channel drops the command.
        if INPUTS
            .try_send(Command::new(id, Input::Delete(options)))
            .is_err()
        {
            error!("t={=u64} ms uart: input channel full", ms());
        }
    }
}

// ---- the firmware: what the driver's outputs do on this board ------------

/// The board: logs every output, tells the workloads about signals, and
/// ends the run when every pod is finished.
struct Board {
    ids: [Id; 2],
    phases: [Phase; 2],
    finished: usize,
}

impl Board {
    fn pod(&self, id: Id) -> usize {
        self.ids.iter().position(|i| *i == id).unwrap_or(WEB)
    }
}

impl Firmware<2, 1, L> for Board {
    type Error = ();

    async fn persist(&mut self, id: Id, lifecycle: &Lifecycle<2, 1, L>) -> Result<(), ()> {
        // No flash on this board: this is where a FlashStore::store goes.
        let pod = self.pod(id);
        let phase = lifecycle.phase();
        if phase != self.phases[pod] {
            info!(
                "t={=u64} ms {=str}: phase {} -> {}",
                ms(),
                NAMES[pod],
                self.phases[pod],
                phase
            );
            self.phases[pod] = phase;
        }
        Ok(())
    }

    async fn perform(&mut self, id: Id, action: Action, l: &Lifecycle<2, 1, L>) -> Result<(), ()> {
        let (t, pod) = (ms(), self.pod(id));
        let name = NAMES[pod];
        let due = l.poll_timeout().map_or(0, |d| d.as_millis());
        match action {
            Action::RemoveEndpoints => {
                info!("t={=u64} ms {=str}: action remove from endpoints", t, name)
            }
            Action::RunPreStop { .. } => {
                info!("t={=u64} ms {=str}: action run pre-stop hook", t, name)
            }
            Action::SendStopSignal { .. } => {
                info!(
                    "t={=u64} ms {=str}: action SIGTERM, SIGKILL due at t={=u64} ms",
                    t, name, due
                );
                SIGNALS.send((pod, false)).await;
            }
            Action::SendKill { .. } => {
                info!("t={=u64} ms {=str}: action SIGKILL", t, name);
                SIGNALS.send((pod, true)).await;
            }
            Action::ContainerStopped { .. } => {
                info!("t={=u64} ms {=str}: action container stopped", t, name)
            }
            Action::Remove { force } => info!(
                "t={=u64} ms {=str}: action remove record (force: {=bool})",
                t, name, force
            ),
            // An action added to the core later: this board does nothing.
            _ => info!("t={=u64} ms {=str}: an action this board does not know", t, name),
        }
        Ok(())
    }

    async fn answered(&mut self, answer: Answer) -> Result<(), ()> {
        if let Ok(Reply::Delete(result)) = answer.reply {
            let name = NAMES[self.pod(answer.command.id)];
            match result {
                Ok(r) => info!(
                    "t={=u64} ms {=str}: delete answered {}, force {=bool}",
                    ms(),
                    name,
                    r.outcome,
                    r.force
                ),
                Err(e) => error!("t={=u64} ms {=str}: delete refused: {}", ms(), name, e),
            }
        }
        Ok(())
    }

    async fn forget(&mut self, id: Id, _: &Lifecycle<2, 1, L>) -> Result<(), ()> {
        info!(
            "t={=u64} ms {=str}: finished, slot freed",
            ms(),
            NAMES[self.pod(id)]
        );
        self.finished += 1;
        if self.finished == NAMES.len() {
            let left = TABLE.with(|t| t.len()).unwrap_or(usize::MAX);
            info!(
                "t={=u64} ms: all pods finished, {=usize} objects left in the table",
                ms(),
                left
            );
            exit(debug::EXIT_SUCCESS);
        }
        Ok(())
    }
}

// ---- the tasks -------------------------------------------------------------

#[embassy_executor::task]
async fn grace(board: Board) {
    let mut board = board;
    let mut driver: Driver<'_, _, _, 4, 2, 1, 8, L> = Driver::new(&TABLE, INPUTS.receiver());
    // `run` returns only with an error.
    let Err(e) = driver.run(&mut board).await;
    error!("t={=u64} ms: the driver stopped: {}", ms(), e);
    exit(debug::EXIT_FAILURE);
}

/// The console (a delete typed at t = 0) and the node agent (it sees
/// deletions at 500 ms).
#[embassy_executor::task]
async fn console_and_agent(ids: [Id; 2]) {
    info!("t={=u64} ms console: delete pod web --grace-period=2", ms());
    let options = DeleteOptions::with_grace(2);
    INPUTS
        .send(Command::new(ids[WEB], Input::Delete(options)))
        .await;
    Timer::at(Clock::from_millis(AGENT_AT_MS)).await;
    for (pod, id) in ids.into_iter().enumerate() {
        info!(
            "t={=u64} ms {=str}: agent sees the deletion",
            ms(),
            NAMES[pod]
        );
        INPUTS.send(Command::new(id, Input::AgentSync)).await;
    }
}

/// The workloads: `web` exits 1 s after SIGTERM, `valve` ignores it; both
/// die at once on SIGKILL.
#[embassy_executor::task]
async fn workloads(ids: [Id; 2]) {
    let mut web_exits_at: Option<Clock> = None;
    loop {
        let next = match web_exits_at {
            Some(at) => match select(SIGNALS.receive(), Timer::at(at)).await {
                Either::First(signal) => Some(signal),
                Either::Second(()) => None,
            },
            None => Some(SIGNALS.receive().await),
        };
        let exited = match next {
            None => {
                web_exits_at = None;
                Some(WEB)
            }
            Some((pod, true)) => Some(pod),
            Some((WEB, false)) => {
                web_exits_at = Some(Clock::now() + Duration::from_millis(1_000));
                None
            }
            Some((pod, false)) => {
                info!(
                    "t={=u64} ms {=str}: process ignores SIGTERM",
                    ms(),
                    NAMES[pod]
                );
                None
            }
        };
        if let Some(pod) = exited {
            info!("t={=u64} ms {=str}: process exits", ms(), NAMES[pod]);
            let command = Command::new(ids[pod], Input::container_exited(0));
            INPUTS.send(command).await;
        }
    }
}

/// Fails the run if the story stalls.
#[embassy_executor::task]
async fn watchdog() {
    Timer::at(Clock::from_millis(GIVE_UP_MS)).await;
    error!("t={=u64} ms: the story should be over by now", ms());
    exit(debug::EXIT_FAILURE);
}

#[embassy_executor::main]
async fn main(spawner: Spawner) {
    let peripherals = unwrap!(cortex_m::Peripherals::take());
    info!(
        "grace-core's embassy driver on a Cortex-M4: 2 pods, inputs from a task and an interrupt"
    );
    start_clock(peripherals.SYST);

    let mut ids = [None; 2];
    for (slot, name) in ids.iter_mut().zip(NAMES) {
        let record = Record::new(unwrap!(InlineName::try_from(name).ok()));
        let lifecycle =
            unwrap!(Lifecycle::new(Strategy::POD, record, &[ContainerSpec::default()]).ok());
        *slot = unwrap!(TABLE.with(|t| t.insert(lifecycle).ok()));
        info!("t={=u64} ms {=str}: created, phase Live", ms(), name);
    }
    let ids = [unwrap!(ids[WEB]), unwrap!(ids[VALVE])];
    critical_section::with(|cs| *IDS.borrow_ref_mut(cs) = [Some(ids[WEB]), Some(ids[VALVE])]);

    let board = Board {
        ids,
        phases: [Phase::Live; 2],
        finished: 0,
    };
    spawner.spawn(unwrap!(grace(board).ok()));
    spawner.spawn(unwrap!(workloads(ids).ok()));
    spawner.spawn(unwrap!(watchdog().ok()));
    spawner.spawn(unwrap!(console_and_agent(ids).ok()));
    start_uart_stand_in(UART_AT_MS);
}

/// Ends the QEMU run with `status` (semihosting SYS_EXIT).
fn exit(status: debug::ExitStatus) -> ! {
    debug::exit(status);
    // Only reached without a semihosting host (a real board, no debugger).
    loop {
        cortex_m::asm::wfi();
    }
}

/// Fails the QEMU run (see the synchronous example for why no location).
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    error!("panicked");
    exit(debug::EXIT_FAILURE)
}
