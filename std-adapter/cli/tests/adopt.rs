//! The agent keeps its promises with real processes when it has trouble
//! itself: SIGKILLed at random points while deletions of real `sh`
//! workloads are in flight and restarted, it adopts its workloads and
//! finishes every deletion on the original deadlines; the 2 s between the
//! stop signal and SIGKILL holds from when the stop signal really went out;
//! one reaper thread serves a thousand workloads; cgroups catch what
//! leaves the process group.
//!
//! The signals' times are the agent's own `kill` system calls, as `strace`
//! records them (entry time and duration, in microseconds): the stop
//! signal went out no later than its call returned, SIGKILL no sooner than
//! its call was entered. `strace` must be installed.
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::disallowed_methods,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]

#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "support/probe.rs"]
mod probe;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::wait_for;
use common::workloads::ProcessIdentity;
use grace_agent::api::{Client, Reply, Request};
use probe::runtime_answers;

const GRACE: &str = env!("CARGO_BIN_EXE_grace");

/// Whether `strace` is missing; without it these tests say so and pass,
/// except under `CI=true`, where they fail (`.ci/run` installs it, so CI
/// always runs them).
fn strace_missing() -> bool {
    let missing = Command::new("strace").arg("-V").output().is_err();
    if missing {
        common::missing_tool("strace is not installed (apt-get install strace)");
    }
    missing
}

/// Seconds since the epoch, as `strace -ttt` prints them.
fn wall() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// One `kill` system call of the agent.
#[derive(Clone, Copy, Debug)]
struct KillCall {
    /// The process group signalled.
    group: u32,
    /// SIGKILL (else the stop signal).
    kill: bool,
    /// When the call was entered.
    entered: f64,
    /// When it returned.
    returned: f64,
}

/// The agent's `kill(-group, SIGTERM|SIGKILL)` calls in a `strace -ttt -T`
/// output file.
fn kill_calls(trace: &Path) -> Vec<KillCall> {
    let text = std::fs::read_to_string(trace).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            // With `-f`, each line starts with the thread's id.
            let line = match line.split_once(' ') {
                Some((tid, rest)) if !tid.contains('.') => rest.trim_start(),
                _ => line,
            };
            let (at, rest) = line.split_once(' ')?;
            let args = rest.strip_prefix("kill(-")?;
            let (group, rest) = args.split_once(", ")?;
            let kill = rest.starts_with("SIGKILL)");
            if !kill && !rest.starts_with("SIGTERM)") {
                return None;
            }
            // Only calls that signalled something.
            if !rest
                .split_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with("= 0 "))
            {
                return None;
            }
            let took = rest.rsplit_once('<')?.1.trim_end_matches('>');
            let entered: f64 = at.parse().ok()?;
            Some(KillCall {
                group: group.parse().ok()?,
                kill,
                entered,
                returned: entered + took.parse::<f64>().ok()?,
            })
        })
        .collect()
}

/// A `grace agent` run under `strace` (its `kill` calls recorded).
struct Agent {
    strace: Child,
    pid: u32,
    log: PathBuf,
}

impl Agent {
    fn start(dir: &Path, run: usize, extra: &[&str]) -> Agent {
        Agent::start_traced(dir, run, "kill", &[], extra)
    }

    /// [`start`](Self::start), tracing the system calls `trace` (`kill`
    /// and more) with more `strace` options (`-f` for every thread, `-e
    /// inject=…` to hold the agent in a traced system call).
    fn start_traced(
        dir: &Path,
        run: usize,
        trace_calls: &str,
        strace_extra: &[&str],
        extra: &[&str],
    ) -> Agent {
        let trace = dir.join(format!("trace.{run}"));
        let log = dir.join(format!("agent.{run}.log"));
        let strace = Command::new("strace")
            .args(["-ttt", "-T", "-e"])
            .arg(format!("trace={trace_calls}"))
            .args(["-e", "signal=none"])
            .args(strace_extra)
            .arg("-o")
            .arg(&trace)
            .arg(GRACE)
            .args(["agent", "--data-dir"])
            .arg(dir)
            .args(extra)
            // The data dir's agent, not a shared store's (.ci/etcd sets it).
            .env_remove("GRACE_ETCD_ENDPOINTS")
            .env_remove("RUST_LOG")
            .stdout(std::fs::File::create(&log).expect("log file"))
            .stderr(std::fs::File::create(dir.join(format!("agent.{run}.err"))).expect("err file"))
            .spawn()
            .expect("strace runs (install strace)");
        let children = format!("/proc/{0}/task/{0}/children", strace.id());
        let mut pid = 0;
        // strace forks short-lived children of its own to test the
        // kernel first: the agent is the child that runs `grace agent`.
        wait_for("the agent starts", Duration::from_secs(10), || {
            let found = std::fs::read_to_string(&children)
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
                .find(|p| {
                    std::fs::read_link(format!("/proc/{p}/exe"))
                        .is_ok_and(|exe| exe == Path::new(GRACE))
                });
            pid = found.unwrap_or(0);
            pid != 0
        });
        wait_for("the agent serves", Duration::from_secs(20), || {
            grace_agent::is_serving(dir)
        });
        Agent { strace, pid, log }
    }

    fn signal(&self, signal: &str) {
        let _ = Command::new("kill")
            .args([signal, &self.pid.to_string()])
            .status();
    }

    /// SIGKILL: a crash.
    fn crash(mut self) {
        self.signal("-KILL");
        let _ = self.strace.wait();
    }

    /// Why the agent is no longer running, if it exited on its own (the
    /// test stops it only at the end of a round).
    fn exited(&mut self, dir: &Path, run: usize) -> Option<String> {
        self.strace.try_wait().ok()??;
        let err = std::fs::read_to_string(dir.join(format!("agent.{run}.err")));
        Some(err.unwrap_or_default().trim().to_owned())
    }

    /// SIGTERM; its log.
    fn stop(mut self) -> String {
        self.signal("-TERM");
        let _ = self.strace.wait();
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// A pod file: grace `grace`, a workload that writes its pid to
/// `<name>.pid` and, if `ignore`, ignores SIGTERM; a pre-stop hook (that
/// writes its pid to `<name>.hook`) if given.
fn pod(dir: &Path, name: &str, grace: i64, ignore: bool, hook: Option<&str>) -> Request {
    let trap = if ignore {
        "trap '' TERM"
    } else {
        "trap 'exit 0' TERM"
    };
    let pid = dir.join(format!("{name}.pid"));
    let hook = hook.map(|h| {
        format!(
            r#","preStop":"echo $$ > {}; {h}""#,
            dir.join(format!("{name}.hook")).display()
        )
    });
    let text = format!(
        r#"{{"metadata":{{"name":"{name}"}},
            "spec":{{"nodeName":"local","terminationGracePeriodSeconds":{grace},
            "containers":[{{"name":"app","command":["sh","-c","{trap}; echo $$ > {pid}; while :; do sleep 1 & wait $!; done"]{hook}}}]}}}}"#,
        pid = pid.display(),
        hook = hook.unwrap_or_default()
    );
    let manifest =
        grace_cli::manifest::parse(&text, || format!("uid-{name}-{}", std::process::id()))
            .expect("a valid pod");
    Request::Apply {
        name: manifest.name,
        object: Box::new(manifest.object),
    }
}

/// Whether `p` still runs (a zombie has ended: it only waits to be reaped).
fn runs(p: &ProcessIdentity) -> bool {
    p.is_alive() && !common::workloads::is_zombie(p.pid)
}

/// The leader of the process group of the process whose pid `file`
/// holds, as it runs now: what the agent signals and records. For a
/// workload's or hook's own shell that is its waiter (the gate's `sh`,
/// its parent, which ends with it); for a process that left its group
/// (`setsid`), itself.
fn process(file: &Path) -> Option<ProcessIdentity> {
    let pid: u32 = std::fs::read_to_string(file).ok()?.trim().parse().ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid pgrp ...`: comm may hold spaces.
    let (_, after) = stat.rsplit_once(')')?;
    let group = after.split_whitespace().nth(2)?.parse().ok()?;
    ProcessIdentity::of(group)
}

fn client(dir: &Path) -> Client {
    Client::connect(dir).expect("the agent serves")
}

/// The names of the objects stored, or `None` if no agent answers.
fn names(dir: &Path) -> Option<BTreeSet<String>> {
    stored_names(dir).ok()
}

/// The names of the objects stored, or why no agent answered.
fn stored_names(dir: &Path) -> Result<BTreeSet<String>, String> {
    let mut client = Client::connect(dir).map_err(|e| e.to_string())?;
    match client
        .call(&Request::Get { name: None })
        .map_err(|e| e.to_string())?
    {
        Reply::Objects { items, .. } => Ok(items.into_iter().map(|i| i.name).collect()),
        other => Err(format!("unexpected reply {other:?}")),
    }
}

/// What one lane of the crash test found wrong.
#[derive(Default)]
struct Findings {
    problems: Vec<String>,
    crashes: usize,
}

/// One workload of a round, as the test saw it.
struct Watched {
    name: String,
    grace: f64,
    ignores_term: bool,
    hook: bool,
    workload: ProcessIdentity,
}

/// Polls the store while a round runs: a record that disappears while its
/// workload (or hook) still runs is a broken promise.
fn watch_records(
    dir: PathBuf,
    processes: BTreeMap<String, Vec<ProcessIdentity>>,
    done: Arc<AtomicBool>,
    problems: Arc<Mutex<Vec<String>>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut present: BTreeSet<String> = processes.keys().cloned().collect();
        while !done.load(Ordering::SeqCst) && !present.is_empty() {
            if let Some(now) = names(&dir) {
                for gone in present.iter().filter(|n| !now.contains(*n)) {
                    for p in &processes[gone] {
                        if runs(p) {
                            problems.lock().expect("lock").push(format!(
                                "{gone}: record removed while pid {} still ran",
                                p.pid
                            ));
                        }
                    }
                }
                present.retain(|n| now.contains(n));
            }
            std::thread::sleep(Duration::from_millis(15));
        }
    })
}

/// One lane: `rounds` rounds on one data directory, each with three pods
/// deleted and the agent SIGKILLed at a random point of their deletions.
fn lane(lane: usize, rounds: usize, seed: u64) -> Findings {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let mut findings = Findings::default();
    let mut rng = seed;
    let mut random = move || {
        // xorshift64: a spread of crash points, reproducible from the seed.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut run = 0;
    for round in 0..rounds {
        eprintln!("lane {lane} round {round}");
        let grace = 3;
        // Every other round, first a crash between a workload's record and
        // its start: the agent is held in the record's `rename`, then
        // SIGKILLed. The pod must start with the next agent.
        let late = format!("late-{round}");
        let start_crash = random() % 2 == 0;
        let agent = if start_crash {
            let held = ["-e", "inject=rename:delay_exit=30000000"];
            let agent = Agent::start_traced(dir, run, "kill,rename", &held, &[]);
            run += 1;
            let mut c = client(dir);
            c.send(&pod(dir, &late, grace, false, None))
                .expect("apply sent");
            wait_for(
                "the late record is written",
                Duration::from_secs(20),
                || workload_record(dir, &late).is_some(),
            );
            agent.crash();
            findings.crashes += 1;
            drop(c);
            let agent = Agent::start(dir, run, &[]);
            run += 1;
            let file = dir.join(format!("{late}.pid"));
            if !wait_until(Duration::from_secs(15), || process(&file).is_some()) {
                findings.problems.push(format!(
                    "lane {lane} round {round}: {late} never started after a crash before its start"
                ));
            }
            agent
        } else {
            let agent = Agent::start(dir, run, &[]);
            run += 1;
            agent
        };
        let specs = [
            (format!("ign-{round}"), true, None),
            (format!("hook-{round}"), true, Some("sleep 30")),
            (format!("quick-{round}"), false, None),
            // Force-deleted (grace 0): its record goes at once, its
            // SIGKILL is owed 2 s after the stop signal, across crashes.
            (format!("force-{round}"), true, None),
        ];
        let forced = |name: &str| name.starts_with("force-");
        let mut c = client(dir);
        for (name, ignore, hook) in &specs {
            c.call(&pod(dir, name, grace, *ignore, *hook))
                .expect("applied");
        }
        let mut watched = Vec::new();
        for (name, ignore, hook) in &specs {
            let file = dir.join(format!("{name}.pid"));
            wait_for("the workload runs", Duration::from_secs(10), || {
                process(&file).is_some()
            });
            watched.push(Watched {
                name: name.clone(),
                grace: grace as f64,
                ignores_term: *ignore,
                hook: hook.is_some(),
                workload: process(&file).expect("running"),
            });
        }
        // Each shell installs its trap before it writes its pid.
        let asked = wall();
        for w in &watched {
            let options = if forced(&w.name) {
                grace_core::DeleteOptions::with_grace(0)
            } else {
                grace_core::DeleteOptions::default()
            };
            c.call(&Request::Delete {
                name: w.name.clone(),
                options,
            })
            .expect("deleted");
        }
        let answered = wall();
        drop(c);
        let mut hooks = BTreeMap::new();
        for w in watched.iter().filter(|w| w.hook) {
            let file = dir.join(format!("{}.hook", w.name));
            wait_for("the hook runs", Duration::from_secs(10), || {
                process(&file).is_some()
            });
            hooks.insert(w.name.clone(), process(&file).expect("hook"));
        }
        // A force delete removes the record while the workload stops.
        let processes = watched
            .iter()
            .filter(|w| !forced(&w.name))
            .map(|w| {
                let mut ps = vec![w.workload.clone()];
                ps.extend(hooks.get(&w.name).cloned());
                (w.name.clone(), ps)
            })
            .collect();
        let done = Arc::new(AtomicBool::new(false));
        let problems = Arc::new(Mutex::new(Vec::new()));
        let monitor = watch_records(
            dir.to_path_buf(),
            processes,
            Arc::clone(&done),
            Arc::clone(&problems),
        );

        // The crash: anywhere in the first 5 s of the deletions (hook,
        // stop signal, floor, SIGKILL), then a restart at once.
        let crash_in = Duration::from_millis(random() % 5_000);
        // Not a wait for readiness: the crash point under test.
        std::thread::sleep(crash_in.saturating_sub(Duration::from_secs_f64(wall() - asked)));
        agent.crash();
        findings.crashes += 1;
        let mut agent = Agent::start(dir, run, &[]);
        run += 1;

        let finished = Instant::now();
        loop {
            match stored_names(dir) {
                Ok(n) if !watched.iter().any(|w| n.contains(&w.name)) => break,
                Ok(_) => {}
                Err(e) => eprintln!("lane {lane} round {round}: no answer: {e}"),
            }
            if finished.elapsed() > Duration::from_secs(30) {
                findings
                    .problems
                    .push(format!("lane {lane} round {round}: deletions unfinished"));
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        done.store(true, Ordering::SeqCst);
        let _ = monitor.join();
        // The force-deleted workload goes once its SIGKILL is due (2 s
        // after the stop signal), whichever agent owes it.
        for w in watched.iter().filter(|w| forced(&w.name)) {
            if !wait_until(Duration::from_secs(15), || !runs(&w.workload)) {
                findings.problems.push(format!(
                    "lane {lane} round {round}: {} left running after its force delete",
                    w.name
                ));
            }
        }
        // The late pod, started after the crash before its start, goes too.
        if start_crash && names(dir).is_some_and(|n| n.contains(&late)) {
            let mut c = client(dir);
            let _ = c.call(&Request::Delete {
                name: late.clone(),
                options: grace_core::DeleteOptions::default(),
            });
            drop(c);
            if !wait_until(Duration::from_secs(15), || {
                names(dir).is_some_and(|n| !n.contains(&late))
            }) {
                findings
                    .problems
                    .push(format!("lane {lane} round {round}: {late} not deleted"));
            }
        }
        if let Some(why) = agent.exited(dir, run - 1) {
            findings.problems.push(format!(
                "lane {lane} round {round}: the restarted agent exited on its own: {why}"
            ));
        }
        findings
            .problems
            .extend(problems.lock().expect("lock").drain(..));
        let _ = agent.stop();

        // The signals, from every run's trace.
        let calls: Vec<KillCall> = (0..run)
            .flat_map(|r| kill_calls(&dir.join(format!("trace.{r}"))))
            .collect();
        for w in &watched {
            let mine: Vec<&KillCall> = calls.iter().filter(|k| k.group == w.workload.pid).collect();
            let term = mine
                .iter()
                .filter(|k| !k.kill)
                .map(|k| k.returned)
                .reduce(f64::min);
            let kill = mine
                .iter()
                .filter(|k| k.kill)
                .map(|k| k.entered)
                .reduce(f64::min);
            let at = format!(
                "lane {lane} round {round} {} (crash at {crash_in:?})",
                w.name
            );
            // The stop signal is due at the end of the hook's budget, or
            // at once; SIGKILL at the end of the grace, or 2 s after the
            // stop signal when the hook spent it all.
            let (term_due, kill_due) = if w.hook {
                (w.grace, w.grace + 2.0)
            } else if forced(&w.name) {
                (0.0, 2.0)
            } else {
                (0.0, w.grace)
            };
            let Some(term) = term else {
                findings.problems.push(format!("{at}: no stop signal"));
                continue;
            };
            if term < asked + term_due {
                findings.problems.push(format!(
                    "{at}: stop signal {:.3} s early",
                    asked + term_due - term
                ));
            }
            if term > answered + term_due + SLACK {
                findings.problems.push(format!(
                    "{at}: stop signal {:.3} s late (deadline extended)",
                    term - answered - term_due
                ));
            }
            match (kill, w.ignores_term) {
                (Some(kill), true) => {
                    if kill < term + 2.0 {
                        findings.problems.push(format!(
                            "{at}: SIGKILL {:.6} s after the stop signal",
                            kill - term
                        ));
                    }
                    if kill < asked + w.grace.min(kill_due) {
                        findings
                            .problems
                            .push(format!("{at}: SIGKILL before the grace was spent"));
                    }
                    if kill > answered + kill_due + SLACK {
                        findings.problems.push(format!(
                            "{at}: SIGKILL {:.3} s late (deadline extended)",
                            kill - answered - kill_due
                        ));
                    }
                }
                // A force-deleted workload whose agent crashed inside the
                // 2 s is SIGKILLed by the next agent's own thread, which
                // this trace does not follow; that it went is checked
                // above (and its timing by
                // d4_a_force_deleted_workload_whose_agent_stopped_…).
                (None, true) if forced(&w.name) => {}
                (None, true) => findings.problems.push(format!("{at}: never SIGKILLed")),
                (Some(_), false) => findings
                    .problems
                    .push(format!("{at}: SIGKILL though it exits on SIGTERM")),
                (None, false) => {}
            }
            let left: Vec<u32> = std::iter::once(&w.workload)
                .chain(hooks.get(&w.name))
                .filter(|p| runs(p))
                .map(|p| p.pid)
                .collect();
            if !left.is_empty() {
                findings
                    .problems
                    .push(format!("{at}: processes left: {left:?}"));
            }
        }
    }
    let table = grace_agent::workloads_dir(dir);
    let left = std::fs::read_dir(&table).map_or(0, |d| d.count());
    if left != 0 {
        findings
            .problems
            .push(format!("lane {lane}: {left} workload records left"));
    }
    if !findings.problems.is_empty() {
        // Kept to look into: the agents' logs and traces.
        findings
            .problems
            .push(format!("lane {lane}: see {}", tmp.keep().display()));
    }
    findings
}

/// How late a signal may be and still count as on its deadline: the agent
/// may have been down when it was due (a crash and a restart take well
/// under this), plus scheduling on a loaded machine. A restart that reset
/// the grace would be a whole grace (3 s) late.
const SLACK: f64 = 1.5;

#[test]
fn d6_crash_at_random_points_keeps_every_promise_with_real_processes() {
    if strace_missing() {
        return;
    }
    // Twelve crashes a run (six lanes of two rounds): enough to meet
    // every crash point the rounds aim at, in a test command that stays
    // quick; a new seed each run covers others. GRACE_CRASH_LANES /
    // GRACE_CRASH_ROUNDS: more for a soak (docs/testing.md), fewer for a
    // quick look.
    let setting = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (lanes, rounds) = (
        setting("GRACE_CRASH_LANES", 6),
        setting("GRACE_CRASH_ROUNDS", 2),
    );
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        | 1;
    let expected = lanes * rounds;
    let lanes: Vec<_> = (0..lanes)
        .map(|l| {
            let s = seed.wrapping_mul(l as u64 + 1) | 1;
            std::thread::spawn(move || lane(l, rounds, s))
        })
        .collect();
    let mut crashes = 0;
    let mut problems = Vec::new();
    for l in lanes {
        let f = l.join().expect("lane ran");
        crashes += f.crashes;
        problems.extend(f.problems);
    }
    assert!(crashes >= expected, "{crashes} crashes");
    assert!(problems.is_empty(), "seed {seed}:\n{}", problems.join("\n"));
}

/// Waits until none of `names` is stored any more.
fn wait_gone(dir: &Path, gone: &[String], limit: Duration) {
    wait_for("the deletions finish", limit, || {
        names(dir).is_some_and(|n| gone.iter().all(|name| !n.contains(name)))
    });
}

/// The hooks' budget: longer than fifty deletions take, so that every
/// hook is still running when the agent is frozen.
const GRACE_S: i64 = 10;

#[test]
fn r62_fifty_stop_signals_due_at_once_each_get_two_seconds_before_sigkill() {
    if strace_missing() {
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let agent = Agent::start(dir, 0, &[]);
    let mut c = client(dir);
    let names: Vec<String> = (0..50).map(|i| format!("h{i}")).collect();
    for name in &names {
        c.call(&pod(dir, name, GRACE_S, true, Some("sleep 30")))
            .expect("applied");
    }
    let pids: Vec<ProcessIdentity> = names
        .iter()
        .map(|n| {
            let file = dir.join(format!("{n}.pid"));
            wait_for("the workload runs", Duration::from_secs(20), || {
                process(&file).is_some()
            });
            process(&file).expect("running")
        })
        .collect();
    let started = Instant::now();
    for name in &names {
        c.call(&Request::Delete {
            name: name.clone(),
            options: grace_core::DeleteOptions::default(),
        })
        .expect("deleted");
    }
    drop(c);
    // Frozen while every hook's budget runs out: on waking, fifty hooks
    // are cut off and fifty stop signals are due at the same instant.
    agent.signal("-STOP");
    let frozen = Instant::now();
    let first_cut_off = started + Duration::from_secs(GRACE_S as u64);
    assert!(
        frozen < first_cut_off,
        "the deletions took {:?}",
        frozen - started
    );
    // Not a wait for readiness: the budgets run out while it is frozen.
    std::thread::sleep(Duration::from_secs(GRACE_S as u64) + Duration::from_millis(500));
    agent.signal("-CONT");
    wait_gone(dir, &names, Duration::from_secs(30));
    let _ = agent.stop();

    let calls = kill_calls(&dir.join("trace.0"));
    let mut gaps = Vec::new();
    for p in &pids {
        let term = calls
            .iter()
            .filter(|k| k.group == p.pid && !k.kill)
            .map(|k| k.returned)
            .reduce(f64::min)
            .expect("a stop signal");
        let kill = calls
            .iter()
            .filter(|k| k.group == p.pid && k.kill)
            .map(|k| k.entered)
            .reduce(f64::min)
            .expect("a SIGKILL");
        gaps.push(kill - term);
        assert!(!runs(p), "pid {} left running", p.pid);
    }
    let terms: Vec<f64> = calls
        .iter()
        .filter(|k| !k.kill && pids.iter().any(|p| p.pid == k.group))
        .map(|k| k.entered)
        .collect();
    let spread = terms.iter().copied().fold(f64::MIN, f64::max)
        - terms.iter().copied().fold(f64::MAX, f64::min);
    let least = gaps.iter().copied().fold(f64::MAX, f64::min);
    eprintln!("50 stop signals sent over {spread:.3} s; least gap to SIGKILL {least:.6} s");
    assert!(least >= 2.0, "a SIGKILL {least:.6} s after its stop signal");
}

#[test]
fn a_thousand_workloads_run_with_a_bounded_number_of_agent_threads() {
    if strace_missing() {
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let agent = Agent::start(dir, 0, &[]);
    let mut c = client(dir);
    // 125 pods of 8 containers (the most an object may have).
    let containers = (0..8)
        .map(|i| format!(r#"{{"name":"c{i}","command":["sleep","1000"]}}"#))
        .collect::<Vec<_>>()
        .join(",");
    for i in 0..125 {
        let text = format!(
            r#"{{"metadata":{{"name":"t{i}"}},"spec":{{"nodeName":"local",
                "containers":[{containers}]}}}}"#
        );
        let manifest =
            grace_cli::manifest::parse(&text, || format!("uid-t{i}")).expect("a valid pod");
        c.call(&Request::Apply {
            name: manifest.name,
            object: Box::new(manifest.object),
        })
        .expect("applied");
    }
    let table = grace_agent::workloads_dir(dir);
    wait_for("a thousand workloads run", Duration::from_secs(30), || {
        // Each record, and its start marker.
        std::fs::read_dir(&table).map_or(0, |d| d.count()) == 2000
    });
    let threads = std::fs::read_dir(format!("/proc/{}/task", agent.pid))
        .expect("the agent runs")
        .count();
    drop(c);
    let _ = agent.stop();
    common::kill_left_workloads(&table);
    eprintln!("{threads} agent threads for 1000 workloads");
    // The runtime, the reaper, the signal handler, the world forwarder,
    // the acceptor and a connection: not one per workload.
    assert!(threads <= 10, "{threads} threads for 1000 workloads");
}

#[test]
fn containment_a_process_that_leaves_its_group_goes_with_its_pod() {
    if strace_missing() {
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let agent = Agent::start(dir, 0, &[]);
    let escapee = dir.join("escapee.pid");
    let main = dir.join("main.pid");
    let text = format!(
        r#"{{"metadata":{{"name":"esc"}},"spec":{{"nodeName":"local","terminationGracePeriodSeconds":5,
            "containers":[{{"name":"app","command":["sh","-c",
            "setsid sh -c 'echo $$ > {e}; exec sleep 1001' & echo $$ > {m}; trap 'exit 0' TERM; while :; do sleep 1 & wait $!; done"]}}]}}}}"#,
        e = escapee.display(),
        m = main.display()
    );
    let manifest = grace_cli::manifest::parse(&text, || "uid-esc".into()).expect("a valid pod");
    let mut c = client(dir);
    c.call(&Request::Apply {
        name: manifest.name,
        object: Box::new(manifest.object),
    })
    .expect("applied");
    wait_for("both run", Duration::from_secs(10), || {
        process(&escapee).is_some() && process(&main).is_some()
    });
    let escaped = process(&escapee).expect("running");
    let leader = process(&main).expect("running");
    assert_ne!(
        std::fs::read_to_string(format!("/proc/{}/stat", escaped.pid)).ok(),
        None
    );
    c.call(&Request::Delete {
        name: "esc".into(),
        options: grace_core::DeleteOptions::default(),
    })
    .expect("deleted");
    drop(c);
    wait_gone(dir, &["esc".to_owned()], Duration::from_secs(15));
    let log = agent.stop();
    assert!(!runs(&leader));
    if log.contains("workloads run in a cgroup v2 each") {
        assert!(
            !runs(&escaped),
            "the cgroup took the process that left its group\n{log}"
        );
    } else {
        // Process groups only: what leaves its group escapes (a known
        // limit, said at start).
        assert!(log.contains("a process group each"), "{log}");
        eprintln!("no writable cgroup v2 hierarchy here: containment by process groups");
        if runs(&escaped) {
            let _ = Command::new("kill")
                .args(["-KILL", &escaped.pid.to_string()])
                .status();
        }
    }
}

/// `grace get`'s STATUS of `name`.
fn status_column(dir: &Path, name: &str) -> String {
    let out = Command::new(GRACE)
        .env_remove("GRACE_ETCD_ENDPOINTS")
        .args(["get", name, "--data-dir"])
        .arg(dir)
        .output()
        .expect("grace runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let column = lines
        .next()
        .and_then(|h| h.split_whitespace().position(|c| c == "STATUS"));
    column
        .and_then(|c| lines.next()?.split_whitespace().nth(c))
        .unwrap_or_default()
        .to_owned()
}

/// `grace get NAME -o json`'s (a Pod's) first container state, and its
/// phase.
fn state(dir: &Path, name: &str) -> (serde_json::Value, serde_json::Value) {
    let out = Command::new(GRACE)
        .env_remove("GRACE_ETCD_ENDPOINTS")
        .args(["get", name, "-o", "json", "--data-dir"])
        .arg(dir)
        .output()
        .expect("grace runs");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    (
        json.pointer("/status/containerStatuses/0/state")
            .cloned()
            .unwrap_or(serde_json::Value::Null),
        json.pointer("/status/phase")
            .cloned()
            .unwrap_or(serde_json::Value::Null),
    )
}

#[test]
fn statuses_are_true_in_kubernetes_words_and_kept_across_restarts() {
    if strace_missing() {
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let agent = Agent::start(dir, 0, &[]);
    let mut c = client(dir);
    let pods = [
        ("ok", "local", r#"["true"]"#),
        ("bad", "local", r#"["false"]"#),
        ("gone", "local", r#"["/nonexistent/bin"]"#),
        ("runs", "local", r#"["sleep","1000"]"#),
        ("elsewhere", "other-node", r#"["sleep","1000"]"#),
    ];
    for (name, node, command) in pods {
        let text = format!(
            r#"{{"metadata":{{"name":"{name}"}},"spec":{{"nodeName":"{node}","restartPolicy":"Never",
                "containers":[{{"name":"app","command":{command}}}]}}}}"#
        );
        let manifest =
            grace_cli::manifest::parse(&text, || format!("uid-{name}")).expect("a valid pod");
        c.call(&Request::Apply {
            name: manifest.name,
            object: Box::new(manifest.object),
        })
        .expect("applied");
    }
    drop(c);
    let expected = [
        ("ok", "Completed"),
        ("bad", "Error"),
        ("gone", "ContainerCannotRun"),
        ("runs", "Running"),
        ("elsewhere", "Pending"),
    ];
    for (name, status) in expected {
        wait_for(
            &format!("{name} is {status}"),
            Duration::from_secs(10),
            || status_column(dir, name) == status,
        );
    }
    let (bad, phase) = state(dir, "bad");
    assert_eq!(bad["terminated"]["exitCode"], 1, "{bad}");
    assert_eq!(bad["terminated"]["reason"], "Error");
    assert_eq!(phase, "Failed");
    let (ok, phase) = state(dir, "ok");
    assert_eq!(ok["terminated"]["exitCode"], 0, "{ok}");
    assert_eq!(phase, "Succeeded");
    let cannot = state(dir, "gone").0["terminated"].clone();
    assert_eq!(cannot["reason"], "ContainerCannotRun");
    assert!(
        cannot["message"]
            .as_str()
            .is_some_and(|m| m.contains("/nonexistent/bin") && m.contains("no such file")),
        "{cannot}"
    );
    assert!(state(dir, "runs").0["running"].is_object());

    // Kept across a restart (the running one adopted), and read without
    // an agent too.
    let _ = agent.stop();
    for (name, status) in expected {
        assert_eq!(status_column(dir, name), status, "{name} with no agent");
    }
    let agent = Agent::start(dir, 1, &[]);
    for (name, status) in expected {
        assert_eq!(status_column(dir, name), status, "{name} after a restart");
    }
    // Its deletion: Terminating, then gone.
    let mut c = client(dir);
    c.call(&Request::Delete {
        name: "runs".into(),
        options: grace_core::DeleteOptions::default(),
    })
    .expect("deleted");
    // `sleep` exits on SIGTERM at once: the object may be gone already.
    let status = status_column(dir, "runs");
    assert!(
        status == "Terminating" || status.is_empty(),
        "`{status}`: Terminating while it stops, or already gone"
    );
    wait_gone(dir, &["runs".to_owned()], Duration::from_secs(10));
    drop(c);
    let _ = agent.stop();
}

#[test]
fn an_unreadable_workload_record_never_lets_its_container_count_as_stopped() {
    if strace_missing() {
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let agent = Agent::start(dir, 0, &[]);
    let mut c = client(dir);
    c.call(&pod(dir, "kept", 2, true, None)).expect("applied");
    drop(c);
    let file = dir.join("kept.pid");
    wait_for("the workload runs", Duration::from_secs(10), || {
        process(&file).is_some()
    });
    let workload = process(&file).expect("running");
    let _ = agent.stop();
    // The record is damaged while no agent runs.
    let table = grace_agent::workloads_dir(dir);
    let record = std::fs::read_dir(&table)
        .expect("table")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_none_or(|e| e != "ran"))
        .expect("one record");
    let saved = std::fs::read(&record).expect("readable");
    std::fs::write(&record, b"{").expect("damaged");

    let agent = Agent::start(dir, 1, &[]);
    // Adoption and reconciling happen before the runtime thread answers.
    wait_for(
        "the agent is through its start",
        Duration::from_secs(20),
        || runtime_answers(dir),
    );
    assert_eq!(status_column(dir, "kept"), "Running");
    assert!(names(dir).is_some_and(|n| n.contains("kept")));
    assert!(runs(&workload));
    let log = agent.stop();
    assert!(log.contains("unreadable workload record"), "{log}");
    assert!(
        !log.contains("kept                 container 0: stopped"),
        "{log}"
    );

    // Repaired, the next agent adopts it and deletes it the Kubernetes way.
    std::fs::write(&record, saved).expect("repaired");
    let agent = Agent::start(dir, 2, &[]);
    let mut c = client(dir);
    c.call(&Request::Delete {
        name: "kept".into(),
        options: grace_core::DeleteOptions::default(),
    })
    .expect("deleted");
    drop(c);
    wait_gone(dir, &["kept".to_owned()], Duration::from_secs(10));
    assert!(!runs(&workload));
    let log = agent.stop();
    assert!(log.contains("adopted kept container 0"), "{log}");
}

/// A pod (grace 20) whose container exits on its own 3 s after it starts,
/// with a pre-stop hook that would run 30 s: deleted at once, its container
/// exits while the hook runs. The hook is cut off, and the record goes only
/// once the hook is gone too; the agent serves on (it used to stop with
/// "not found" when the hook's end came after the record's removal).
#[test]
fn a_container_that_exits_while_its_pre_stop_hook_runs_is_stopped_once_the_hook_is_gone() {
    if strace_missing() {
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let mut agent = Agent::start(dir, 0, &[]);
    let (main, hook) = (dir.join("short.pid"), dir.join("short.hook"));
    let text = format!(
        r#"{{"metadata":{{"name":"short"}},"spec":{{"nodeName":"local","terminationGracePeriodSeconds":20,
            "containers":[{{"name":"app","command":["sh","-c","echo $$ > {m}; sleep 3"],
            "preStop":"echo $$ > {h}; sleep 30"}}]}}}}"#,
        m = main.display(),
        h = hook.display()
    );
    let manifest = grace_cli::manifest::parse(&text, || "uid-short".into()).expect("a valid pod");
    let mut c = client(dir);
    c.call(&Request::Apply {
        name: manifest.name,
        object: Box::new(manifest.object),
    })
    .expect("applied");
    wait_for("the workload runs", Duration::from_secs(10), || {
        process(&main).is_some()
    });
    let workload = process(&main).expect("running");
    let asked = Instant::now();
    c.call(&Request::Delete {
        name: "short".into(),
        options: grace_core::DeleteOptions::default(),
    })
    .expect("deleted");
    drop(c);
    wait_for("the hook runs", Duration::from_secs(10), || {
        process(&hook).is_some()
    });
    let hook = process(&hook).expect("running");
    let done = Arc::new(AtomicBool::new(false));
    let problems = Arc::new(Mutex::new(Vec::new()));
    let monitor = watch_records(
        dir.to_path_buf(),
        BTreeMap::from([("short".to_owned(), vec![workload.clone(), hook.clone()])]),
        Arc::clone(&done),
        Arc::clone(&problems),
    );
    wait_gone(dir, &["short".to_owned()], Duration::from_secs(15));
    // Ended by the container's exit, not by the grace.
    assert!(asked.elapsed() < Duration::from_secs(10));
    done.store(true, Ordering::SeqCst);
    let _ = monitor.join();
    assert_eq!(*problems.lock().expect("lock"), Vec::<String>::new());
    assert!(!runs(&workload) && !runs(&hook));
    assert_eq!(agent.exited(dir, 0), None, "the agent serves on");
    let log = agent.stop();
    assert!(
        log.contains("short                container 0: stopped"),
        "{log}"
    );
    let table = grace_agent::workloads_dir(dir);
    assert_eq!(std::fs::read_dir(&table).map_or(0, |d| d.count()), 0);
}

/// A crash after an object's record was removed but before its workload's
/// record was leaves a record of a process that is gone, for an object
/// that is gone: the next agent drops it and serves on (it used to stop
/// with "not found"). Both kinds, container and hook.
#[test]
fn a_workload_record_whose_object_was_removed_before_a_crash_is_dropped_and_the_agent_serves_on() {
    if strace_missing() {
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    // A process that was: its identity, then it is gone.
    let mut child = Command::new("sleep").arg("30").spawn().expect("sleep");
    let gone = ProcessIdentity::of(child.id()).expect("running");
    let _ = child.kill();
    let _ = child.wait();
    for hook in [false, true] {
        common::workloads::write_record(
            &grace_agent::workloads_dir(dir),
            &common::workloads::WorkloadRecord {
                object: "ghost".into(),
                container: 0,
                hook,
                process: gone.clone(),
                cgroup: None,
                stop_signal_sent: None,
                sigkill_at: None,
                marks_start: false,
            },
        );
    }
    let mut agent = Agent::start(dir, 0, &[]);
    let records = grace_agent::workloads_dir(dir);
    wait_for("the records are dropped", Duration::from_secs(10), || {
        std::fs::read_dir(&records).is_ok_and(|d| d.count() == 0)
    });
    // Still serving: a pod runs and is deleted as usual.
    let mut c = client(dir);
    c.call(&pod(dir, "after", 2, false, None)).expect("applied");
    let file = dir.join("after.pid");
    wait_for("the workload runs", Duration::from_secs(10), || {
        process(&file).is_some()
    });
    c.call(&Request::Delete {
        name: "after".into(),
        options: grace_core::DeleteOptions::default(),
    })
    .expect("deleted");
    drop(c);
    wait_gone(dir, &["after".to_owned()], Duration::from_secs(10));
    assert_eq!(agent.exited(dir, 0), None, "the agent serves on");
    let log = agent.stop();
    assert!(
        log.contains("ghost container 0 ended while no agent ran"),
        "{log}"
    );
}

/// `--on-exit=stop` (R84, as the kubelet's graceful node shutdown): SIGTERM
/// to the agent stops every workload the Kubernetes way before it exits —
/// the pre-stop hook for its budget, the stop signal, SIGKILL once the
/// grace is spent and never under 2 s after the stop signal — and nothing
/// is left running; the objects stay, their containers stopped, and the
/// next agent starts nothing again.
#[test]
fn r84_on_exit_stop_stops_every_workload_the_kubernetes_way_before_the_agent_exits() {
    if strace_missing() {
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let agent = Agent::start(dir, 0, &["--on-exit=stop"]);
    let grace = 3;
    // (name, ignores SIGTERM, hook)
    let specs = [
        ("quick", false, None),
        ("stubborn", true, None),
        ("hooked", true, Some("sleep 30")),
    ];
    let mut c = client(dir);
    for (name, ignore, hook) in specs {
        c.call(&pod(dir, name, grace, ignore, hook))
            .expect("applied");
    }
    drop(c);
    let mut workloads = BTreeMap::new();
    for (name, ..) in specs {
        let file = dir.join(format!("{name}.pid"));
        wait_for("the workload runs", Duration::from_secs(10), || {
            process(&file).is_some()
        });
        workloads.insert(name, process(&file).expect("running"));
    }
    let asked = wall();
    agent.signal("-TERM");
    let hook_file = dir.join("hooked.hook");
    wait_for("the pre-stop hook runs", Duration::from_secs(10), || {
        process(&hook_file).is_some()
    });
    let hook = process(&hook_file).expect("the hook runs");
    // A second SIGTERM changes nothing: the agent goes on stopping.
    let log = agent.stop();
    let exited = wall();

    let calls = kill_calls(&dir.join("trace.0"));
    let signals = |pid: u32, kill: bool| -> Vec<KillCall> {
        calls
            .iter()
            .filter(|k| k.group == pid && k.kill == kill)
            .copied()
            .collect()
    };
    let grace = grace as f64;
    for (name, ignore, hook) in specs {
        let pid = workloads[name].pid;
        let term = signals(pid, false)
            .first()
            .map(|k| k.returned)
            .unwrap_or_else(|| panic!("{name}: no stop signal\n{log}"));
        let kill = signals(pid, true).first().map(|k| k.entered);
        // The stop signal after the hook's budget, or at once.
        let term_due = if hook.is_some() { grace } else { 0.0 };
        assert!(term >= asked + term_due, "{name}: stop signal early\n{log}");
        match (ignore, kill) {
            (false, None) => {}
            (false, Some(_)) => panic!("{name}: SIGKILL though it exits on SIGTERM\n{log}"),
            (true, None) => panic!("{name}: never SIGKILLed\n{log}"),
            (true, Some(kill)) => {
                assert!(
                    kill >= asked + grace,
                    "{name}: SIGKILL before the grace\n{log}"
                );
                assert!(
                    kill >= term + 2.0,
                    "{name}: SIGKILL {:.6} s after the stop signal\n{log}",
                    kill - term
                );
                assert!(kill <= exited, "{name}: SIGKILL after the agent exited");
            }
        }
        assert!(!runs(&workloads[name]), "{name} still runs\n{log}");
    }
    assert!(!runs(&hook), "the hook still runs\n{log}");
    assert!(log.contains("--on-exit=stop"), "{log}");
    assert!(log.contains("0 workload(s) left running"), "{log}");
    let table = grace_agent::workloads_dir(dir);
    assert_eq!(std::fs::read_dir(&table).map_or(0, |d| d.count()), 0);
    // The objects stay, their containers stopped (as pods on a node that
    // shut down), read without an agent; a new agent starts nothing.
    for (name, ..) in specs {
        let (state, _) = state(dir, name);
        assert!(state.get("terminated").is_some(), "{name}: {state}");
    }
    let agent = Agent::start(dir, 1, &[]);
    assert_eq!(
        names(dir),
        Some(specs.iter().map(|(n, ..)| (*n).to_owned()).collect())
    );
    // Whatever it would start, it starts before its runtime thread answers.
    wait_for(
        "the agent is through its start",
        Duration::from_secs(20),
        || runtime_answers(dir),
    );
    let log = agent.stop();
    assert!(log.contains("0 workload(s) left running"), "{log}");
}

/// `--on-exit` takes `leave` or `stop`; anything else, or `stop` with
/// `--etcd`, is a usage error naming the flag (exit code 2), and no agent
/// starts.
#[test]
fn on_exit_takes_leave_or_stop_and_refuses_anything_else_naming_the_flag() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("data");
    for (args, says) in [
        (&["--on-exit=later"][..], "--on-exit"),
        (
            &["--on-exit=stop", "--etcd", "http://127.0.0.1:1"][..],
            "--on-exit=stop",
        ),
    ] {
        let out = Command::new(GRACE)
            .env_remove("GRACE_ETCD_ENDPOINTS")
            .args(["agent", "--data-dir"])
            .arg(&dir)
            .args(args)
            .output()
            .expect("grace runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!dir.exists(), "{args:?}: nothing is created");
    }
}

/// Whether `ready` holds within `limit` (polled).
fn wait_until(limit: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if ready() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    ready()
}

/// The record of `name`'s container 0 in the workload table, as JSON.
fn workload_record(dir: &Path, name: &str) -> Option<serde_json::Value> {
    let file = grace_agent::workloads_dir(dir).join(common::workloads::file_name(name, 0, false));
    serde_json::from_slice(&std::fs::read(file).ok()?).ok()
}

/// A pod whose workload handles SIGTERM by writing `<name>.term` and goes
/// on (it must be SIGKILLed), and writes its pid to `<name>.pid`.
fn stubborn_pod(dir: &Path, name: &str, grace: i64) -> Request {
    let term = dir.join(format!("{name}.term"));
    let pid = dir.join(format!("{name}.pid"));
    let text = format!(
        r#"{{"metadata":{{"name":"{name}"}},
            "spec":{{"nodeName":"local","terminationGracePeriodSeconds":{grace},
            "containers":[{{"name":"app","command":["sh","-c","trap 'echo t >> {term}' TERM; echo $$ > {pid}; while :; do sleep 1 & wait $!; done"]}}]}}}}"#,
        term = term.display(),
        pid = pid.display(),
    );
    let manifest =
        grace_cli::manifest::parse(&text, || format!("uid-{name}-{}", std::process::id()))
            .expect("a valid pod");
    Request::Apply {
        name: manifest.name,
        object: Box::new(manifest.object),
    }
}

/// Issue 27 item 3 (D4): a force delete removes the record at once while
/// SIGKILL is still owed 2 s after SIGTERM. The agent stopped inside those
/// 2 s (SIGTERM, `--on-exit=leave`): the next agent finds the workload
/// without an object and SIGKILLs it when due — not sooner than 2 s after
/// the one stop signal, which it does not send again — instead of leaving
/// it running for good.
#[test]
fn d4_a_force_deleted_workload_whose_agent_stopped_before_its_sigkill_is_killed_by_the_next_agent()
{
    if strace_missing() {
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let agent = Agent::start(dir, 0, &[]);
    let mut c = client(dir);
    c.call(&stubborn_pod(dir, "forced", 30)).expect("applied");
    let file = dir.join("forced.pid");
    wait_for("the workload runs", Duration::from_secs(10), || {
        process(&file).is_some()
    });
    let workload = process(&file).expect("running");
    c.call(&Request::Delete {
        name: "forced".into(),
        options: grace_core::DeleteOptions::with_grace(0),
    })
    .expect("force-deleted");
    drop(c);
    wait_for("the stop signal arrives", Duration::from_secs(10), || {
        dir.join("forced.term").exists()
    });
    // Stopped inside the 2 s: the agent leaves its workloads running.
    let log = agent.stop();
    assert!(runs(&workload), "still owed its SIGKILL: {log}");
    // Every thread's kill calls (the SIGKILL may be any thread's).
    let agent = Agent::start_traced(dir, 1, "kill", &["-f"], &[]);
    wait_for("the next agent kills it", Duration::from_secs(15), || {
        !runs(&workload)
    });
    wait_for("its record goes", Duration::from_secs(10), || {
        std::fs::read_dir(grace_agent::workloads_dir(dir)).is_ok_and(|d| d.count() == 0)
    });
    let log = agent.stop();
    assert!(
        log.contains("forced container 0 runs but its object is gone: stop signal sent before"),
        "{log}"
    );
    let first = kill_calls(&dir.join("trace.0"));
    let next = kill_calls(&dir.join("trace.1"));
    let term = first
        .iter()
        .find(|k| k.group == workload.pid && !k.kill)
        .expect("the stop signal went out")
        .returned;
    assert!(
        !next.iter().any(|k| k.group == workload.pid && !k.kill),
        "the stop signal is not sent again: {next:?}"
    );
    let kill = next
        .iter()
        .find(|k| k.group == workload.pid && k.kill)
        .expect("SIGKILLed by the next agent")
        .entered;
    assert!(
        kill >= term + 2.0,
        "SIGKILL {:.6} s after the stop signal",
        kill - term
    );
}

/// Issue 27 item 12 (D6, R62): the agent crashes just after the stop
/// signal went out, before the store says so (its commit is held up by a
/// slow disk: each `pwrite64` delayed). The next agent does not send the stop
/// signal again and does not count the 2 s from a second one: SIGKILL
/// comes when it was due (or at once, if that passed while no agent ran),
/// not later by the downtime.
#[test]
fn d6_a_crash_just_after_the_stop_signal_neither_repeats_it_nor_moves_sigkill_later() {
    if strace_missing() {
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let slow_disk = ["-e", "inject=pwrite64:delay_enter=300000"];
    let agent = Agent::start_traced(dir, 0, "kill,pwrite64", &slow_disk, &[]);
    let mut c = client(dir);
    c.call(&stubborn_pod(dir, "crashed", 2)).expect("applied");
    let file = dir.join("crashed.pid");
    wait_for("the workload runs", Duration::from_secs(20), || {
        process(&file).is_some()
    });
    let workload = process(&file).expect("running");
    let asked = wall();
    // Its answer would come only once the stop signal is written down.
    c.send(&Request::Delete {
        name: "crashed".into(),
        options: grace_core::DeleteOptions::default(),
    })
    .expect("delete sent");
    wait_for("the stop signal arrives", Duration::from_secs(20), || {
        dir.join("crashed.term").exists()
    });
    // The agent writes that the signal went out in its workload table
    // just after sending it (the one window where a crash sends it again,
    // docs/agent.md: microseconds when the agent runs, but it can be
    // descheduled there on a loaded machine, and a crash at the trap's
    // file alone then fell inside it: a flake seen beside two CPU hogs).
    wait_for(
        "the table says the signal went out",
        Duration::from_secs(20),
        || {
            std::fs::read_dir(dir.join("workloads")).is_ok_and(|files| {
                files.flatten().any(|f| {
                    std::fs::read_to_string(f.path())
                        .is_ok_and(|t| t.contains("\"stop_signal_sent\""))
                })
            })
        },
    );
    // The commit that says it went out waits on the slow disk.
    agent.crash();
    drop(c);
    // Restarted at once, inside the 2 s: a SIGKILL counted from a second
    // stop signal would come later by the downtime.
    let agent = Agent::start(dir, 1, &[]);
    let serving = wall();
    wait_for("the workload is killed", Duration::from_secs(15), || {
        !runs(&workload)
    });
    wait_gone(dir, &["crashed".to_owned()], Duration::from_secs(10));
    let _ = agent.stop();
    let first = kill_calls(&dir.join("trace.0"));
    let next = kill_calls(&dir.join("trace.1"));
    let term = first
        .iter()
        .find(|k| k.group == workload.pid && !k.kill)
        .expect("the stop signal went out")
        .returned;
    assert!(
        !next.iter().any(|k| k.group == workload.pid && !k.kill),
        "the stop signal was sent again: {next:?}"
    );
    let kill = next
        .iter()
        .find(|k| k.group == workload.pid && k.kill)
        .expect("SIGKILLed by the next agent")
        .entered;
    assert!(
        kill >= term + 2.0,
        "SIGKILL {:.6} s after the stop signal",
        kill - term
    );
    assert!(kill >= asked + 2.0, "SIGKILL before the grace was spent");
    // Due 2 s after the one stop signal (or at once, if that passed
    // while no agent ran), not 2 s after a second one.
    let due = (term + 2.0).max(serving);
    assert!(
        kill < due + 1.0,
        "SIGKILL {:.3} s after it was due",
        kill - due
    );
}

/// Issue 27 item 9: the agent dies after a workload's record is written but
/// before its command runs (held in the record's `rename`). The gate never
/// opened, so nothing ran: the next agent starts the pod instead of
/// reporting it terminated with 137 (`ContainerStatusUnknown`). The
/// interrupted `grace apply` says its outcome is unknown and how to check.
#[test]
fn a_crash_between_the_workload_record_and_the_start_leaves_a_pod_the_next_agent_starts() {
    if strace_missing() {
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let held = ["-e", "inject=rename:delay_exit=30000000"];
    let agent = Agent::start_traced(dir, 0, "kill,rename", &held, &[]);
    let pid = dir.join("late.pid");
    let manifest = dir.join("late.json");
    std::fs::write(
        &manifest,
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"late"}},
                "spec":{{"nodeName":"local","terminationGracePeriodSeconds":1,
                "containers":[{{"name":"app","command":["sh","-c","echo $$$$ > {}; exec sleep 1000"]}}]}}}}"#,
            pid.display()
        ),
    )
    // `$$$$`: the shell's `$$` once the agent expanded the command as the
    // kubelet does.
    .expect("manifest");
    let apply = Command::new(GRACE)
        .args(["apply", "-f"])
        .arg(&manifest)
        .arg("--data-dir")
        .arg(dir)
        .env_remove("GRACE_ETCD_ENDPOINTS")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("grace apply");
    wait_for(
        "the workload's record is written",
        Duration::from_secs(20),
        || workload_record(dir, "late").is_some(),
    );
    assert!(!pid.exists(), "held before its command runs");
    agent.crash();
    let out = apply.wait_with_output().expect("apply ends");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(!err.contains("Error from server"), "{err}");
    assert!(err.contains("the outcome is unknown"), "{err}");
    assert!(err.contains("grace get late"), "{err}");
    let agent = Agent::start(dir, 1, &[]);
    let started = wait_until(Duration::from_secs(15), || process(&pid).is_some());
    if !started {
        let kept = tmp.keep();
        panic!("the pod never started: see {}", kept.display());
    }
    let workload = process(&pid).expect("running");
    wait_for("it is reported running", Duration::from_secs(10), || {
        status_column(dir, "late") == "Running"
    });
    let log = agent.stop();
    assert!(
        log.contains("late container 0 never ran (an agent stopped before its start)"),
        "{log}"
    );
    assert!(runs(&workload), "left running by --on-exit=leave");
    let agent = Agent::start(dir, 2, &[]);
    let mut c = client(dir);
    c.call(&Request::Delete {
        name: "late".into(),
        options: grace_core::DeleteOptions::default(),
    })
    .expect("deleted");
    drop(c);
    wait_gone(dir, &["late".to_owned()], Duration::from_secs(15));
    let _ = agent.stop();
    assert!(!runs(&workload));
}
