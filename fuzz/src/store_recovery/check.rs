//! The invariants of `store_recovery`, checked on what took effect — the
//! world's log of applied writes and carried-out actions, in order — and on
//! the store itself. Nothing here trusts the runtime's memory: a decision
//! counts once the store holds it, an action once the actuator did it.

use std::collections::BTreeMap;

use grace_core::{Action, Container, Name, Now, Phase, Stage, Timestamp};
use grace_std::runtime::{CONTAINERS, KillRecord, ObjectLifecycle, Recovery};
use grace_std::store::{KillState, Listing, Store, StoredObject};

use super::world::{Event, Written};

/// R62 in milliseconds.
const MIN_STOP_MS: u64 = 2_000;

/// The epoch and the lifecycle the runtime persisted with an object
/// (`StoredObject::agent`).
pub fn persisted(object: &StoredObject) -> Result<(String, ObjectLifecycle), String> {
    decode(object.agent.as_ref())
}

/// The epoch and the lifecycle of a stored kill state.
fn decode(agent: Option<&KillState>) -> Result<(String, ObjectLifecycle), String> {
    let agent = agent.ok_or("no kill state stored")?;
    let record = KillRecord::decode(agent).map_err(|e| e.to_string())?;
    Ok((record.epoch, record.lifecycle))
}

/// R10: a stored negative grace reads as 1.
fn read_grace(g: i64) -> i64 {
    if g < 0 { 1 } else { g }
}

fn after_seconds(ms: u64, seconds: i64) -> u64 {
    let seconds = u64::try_from(seconds).unwrap_or(0);
    ms.saturating_add(seconds.saturating_mul(1000))
}

fn phase_rank(p: Phase) -> u8 {
    match p {
        Phase::Live => 0,
        Phase::GracefulPending => 1,
        Phase::Terminating => 2,
        Phase::Deleted => 3,
        other => panic!("unknown to the checker: {other:?}"),
    }
}

fn stage_rank(s: Stage) -> u8 {
    match s {
        Stage::Running => 0,
        Stage::PreStop { .. } => 1,
        Stage::AwaitingTurn { .. } => 2,
        Stage::Stopping { .. } => 3,
        Stage::Killed => 4,
        Stage::Stopped => 5,
        other => panic!("unknown to the checker: {other:?}"),
    }
}

/// What is known of one container's kill, on the current boot's clock.
#[derive(Debug, Default)]
struct Kill {
    /// The persisted lifecycle said the kill had started.
    killing: bool,
    /// The agent's budget as last persisted.
    remembered: i64,
    /// No SIGKILL before this (the kill's start plus the budget, or a
    /// shorter budget counted from when it was persisted).
    earliest: Option<u64>,
    /// When each container's stop signal was decided (persisted).
    signal: [Option<u64>; CONTAINERS],
    /// Whether each container's stop signal was carried out.
    signalled: [bool; CONTAINERS],
}

/// One object (one uid), as the log shows it.
#[derive(Debug)]
struct Tracked {
    name: Name,
    removed: bool,
    /// A delete of it was answered `Ok` (not a dry run).
    accepted: bool,
    /// A persisted lifecycle said it was evicted.
    evicted: bool,
    /// The lifecycle last persisted, with the boot it was written in
    /// (boxed: a lifecycle is kilobytes, and the map moves its values).
    last: Option<(Box<ObjectLifecycle>, u32)>,
    ts: Option<Timestamp>,
    grace: Option<i64>,
    kill: Kill,
}

/// The invariants, fed with the world's log after every step.
pub struct Checker {
    recovery: Recovery,
    boot: u32,
    epoch: String,
    /// By uid.
    objects: BTreeMap<String, Tracked>,
    /// The uid stored under each name, as the log says.
    names: BTreeMap<String, String>,
    /// Writes the log holds: the store's revision counts the writes it
    /// applied, one each.
    writes: u64,
}

impl Checker {
    pub fn new(recovery: Recovery, epoch: String) -> Self {
        Checker {
            recovery,
            boot: 0,
            epoch,
            objects: BTreeMap::new(),
            names: BTreeMap::new(),
            writes: 0,
        }
    }

    /// Another boot: every workload is gone, and instants of the old
    /// monotonic clock mean nothing any more.
    pub fn reboot(&mut self, epoch: String) {
        self.boot += 1;
        self.epoch = epoch;
        for t in self.objects.values_mut() {
            t.kill = Kill::default();
        }
    }

    /// The uid the log says is stored under `name`.
    pub fn uid_of(&self, name: &str) -> Option<&str> {
        self.names.get(name).map(String::as_str)
    }

    /// A delete of `uid` was answered `Ok`.
    pub fn accepted(&mut self, uid: &str) -> Result<(), String> {
        let t = self
            .objects
            .get_mut(uid)
            .ok_or_else(|| format!("a delete of {uid} was accepted, but it was never stored"))?;
        t.accepted = true;
        Ok(())
    }

    /// Everything that took effect during a step at `now`.
    pub fn events(&mut self, events: &[Event], now: Now) -> Result<(), String> {
        for event in events {
            match event {
                Event::Wrote(write) => self.wrote(write, now)?,
                Event::Acted {
                    object,
                    uid,
                    action,
                } => self.acted(object.as_str(), uid.as_str(), *action, now)?,
            }
        }
        Ok(())
    }

    fn wrote(&mut self, write: &Written, now: Now) -> Result<(), String> {
        self.writes += 1;
        match write {
            Written::Stored {
                name,
                created: true,
                uid,
                ..
            } => {
                let uid = uid.as_str();
                if self.objects.contains_key(uid) {
                    return Err(format!("invariant 1: uid {uid} stored a second time"));
                }
                self.names.insert(name.to_string(), uid.to_owned());
                self.objects.insert(
                    uid.to_owned(),
                    Tracked {
                        name: name.clone(),
                        removed: false,
                        accepted: false,
                        evicted: false,
                        last: None,
                        ts: None,
                        grace: None,
                        kill: Kill::default(),
                    },
                );
                self.examine(write, now)
            }
            Written::Stored { name, uid, .. } => {
                let (name, uid) = (name.as_str(), uid.as_str());
                if self.uid_of(name) != Some(uid) {
                    return Err(format!(
                        "{name}: {uid} written over {:?}",
                        self.uid_of(name)
                    ));
                }
                self.examine(write, now)
            }
            Written::Removed {
                name,
                uid: precondition,
            } => {
                let name = name.as_str();
                let uid = self
                    .names
                    .remove(name)
                    .ok_or_else(|| format!("{name}: removed, but nothing was stored"))?;
                if precondition.as_deref() != Some(uid.as_str()) {
                    return Err(format!(
                        "R75: {name} ({uid}) removed without its uid as precondition: {precondition:?}"
                    ));
                }
                let t = self.objects.get_mut(&uid).ok_or("untracked uid")?;
                match &t.last {
                    Some((lc, _)) if !lc.is_stored() => {}
                    other => {
                        return Err(format!(
                            "invariant 7: {name} ({uid}) removed before its removal was persisted; last persisted: {other:?}"
                        ));
                    }
                }
                t.removed = true;
                // From now on nothing of it is persisted: any later input
                // may shorten its kill, to no less than 1 s (R54).
                let floor = now.mono.as_millis().saturating_add(1000);
                t.kill.earliest = Some(t.kill.earliest.map_or(floor, |e| e.min(floor)));
                Ok(())
            }
        }
    }

    /// A stored (created or updated) object.
    fn examine(&mut self, write: &Written, now: Now) -> Result<(), String> {
        let Written::Stored {
            uid,
            deletion_timestamp,
            deletion_grace_period_seconds,
            agent,
            ..
        } = write
        else {
            return Ok(());
        };
        let uid = uid.as_str();
        let honour = self.recovery == Recovery::HonourOriginalDeadline;
        let (boot, epoch) = (self.boot, &self.epoch);
        let t = self.objects.get_mut(uid).ok_or("untracked uid")?;
        let name = t.name.clone();
        let fail = |why: String| format!("{name} ({uid}): {why}");
        if t.removed {
            return Err(fail("invariant 1: written again after its removal".into()));
        }
        let (written_epoch, lc) = decode(agent.as_ref()).map_err(&fail)?;
        if written_epoch != *epoch {
            return Err(fail(format!(
                "kill state written for epoch {written_epoch:?} on {epoch:?}"
            )));
        }

        // Invariant 2 / R16: never unset, never later than max(previous, now).
        if let Some(previous) = t.ts {
            let bound = previous.max(now.wall.floor_to_timestamp());
            match *deletion_timestamp {
                None => {
                    return Err(fail(format!(
                        "invariant 2: deletion timestamp {previous} unset"
                    )));
                }
                Some(ts) if ts > bound => {
                    return Err(fail(format!(
                        "invariant 2/R16: deletion timestamp moved later: {previous} -> {ts} (bound {bound})"
                    )));
                }
                Some(_) => {}
            }
        }
        if deletion_timestamp.is_some() {
            t.ts = *deletion_timestamp;
        }
        // Invariant 2: the stored grace never grows.
        if let Some(previous) = t.grace {
            match *deletion_grace_period_seconds {
                None => return Err(fail(format!("invariant 2: grace {previous} unset"))),
                Some(g) if read_grace(g) > read_grace(previous) => {
                    return Err(fail(format!("invariant 2: grace grew: {previous} -> {g}")));
                }
                Some(_) => {}
            }
        }
        if deletion_grace_period_seconds.is_some() {
            t.grace = *deletion_grace_period_seconds;
        }

        // The phase only moves forward, across restarts too.
        if let Some((previous, _)) = &t.last
            && phase_rank(lc.phase()) < phase_rank(previous.phase())
        {
            return Err(fail(format!(
                "the persisted phase went back: {} -> {}",
                previous.phase(),
                lc.phase()
            )));
        }
        let agent = lc.agent();
        t.evicted |= agent.evicted;

        // The kill's lower bound (invariant 3, D5).
        let now_ms = now.mono.as_millis();
        let kill = &mut t.kill;
        let start = agent.killing && (!kill.killing || agent.remembered_grace < kill.remembered);
        if start {
            let until = after_seconds(now_ms, agent.remembered_grace);
            kill.earliest = Some(kill.earliest.map_or(until, |e| e.min(until)));
        }
        kill.killing = agent.killing;
        kill.remembered = agent.remembered_grace;
        for (i, c) in lc.containers().iter().enumerate() {
            let Stage::Stopping { kill_at } = c.stage() else {
                continue;
            };
            let signal = c
                .stop_signal_sent_at()
                .ok_or_else(|| fail(format!("container {i} stopping without a signal time")))?
                .as_millis();
            if let Some(slot) = kill.signal.get_mut(i) {
                *slot = Some(signal);
            }
            let kill_at = kill_at.as_millis();
            let earliest = kill
                .earliest
                .ok_or_else(|| fail(format!("container {i} stopping, the kill never started")))?;
            if kill_at < signal.saturating_add(MIN_STOP_MS) || kill_at < earliest {
                return Err(fail(format!(
                    "invariant 3/R62: container {i}: SIGKILL persisted as due at {kill_at} ms, stop signal at {signal} ms, budget spent at {earliest} ms"
                )));
            }
        }

        // D6 (HonourOriginalDeadline): on one boot a persisted deadline
        // never moves later and a stage never goes back, across restarts.
        if honour
            && let Some((previous, previous_boot)) = &t.last
            && *previous_boot == boot
        {
            for (i, (a, b)) in previous
                .containers()
                .iter()
                .zip(lc.containers())
                .enumerate()
            {
                // The one later move allowed: SIGKILL put at 2 s after the
                // stop signal really went out (R62), when it went out
                // later than it was due.
                let floor = Container::stop_signal_sent_at(b)
                    .map(|sent| sent + grace_core::Duration::from_secs(2));
                let (a, b) = (Container::stage(a), Container::stage(b));
                if stage_rank(b) < stage_rank(a) {
                    return Err(fail(format!(
                        "D6: container {i}'s persisted stage went back: {a:?} -> {b:?}"
                    )));
                }
                let later = match (a, b) {
                    (Stage::PreStop { cutoff: x }, Stage::PreStop { cutoff: y })
                    | (Stage::AwaitingTurn { cutoff: x }, Stage::AwaitingTurn { cutoff: y }) => {
                        y > x
                    }
                    (Stage::Stopping { kill_at: x }, Stage::Stopping { kill_at: y }) => {
                        y > x && Some(y) != floor
                    }
                    _ => false,
                };
                if later {
                    return Err(fail(format!(
                        "D6: container {i}'s persisted deadline moved later: {a:?} -> {b:?}"
                    )));
                }
            }
        }
        match &mut t.last {
            Some((last, last_boot)) => {
                **last = lc;
                *last_boot = boot;
            }
            None => t.last = Some((Box::new(lc), boot)),
        }
        Ok(())
    }

    fn acted(&mut self, object: &str, uid: &str, action: Action, now: Now) -> Result<(), String> {
        let t = self
            .objects
            .get_mut(uid)
            .ok_or_else(|| format!("{object}: {action:?} for {uid}, never stored"))?;
        let fail = |why: String| format!("{object} ({uid}): {action:?}: {why}");
        if t.name != object {
            return Err(fail(format!(
                "carried out for the object stored as {}",
                t.name
            )));
        }
        // Invariant 7, write-ahead: while the record is stored, an action
        // is carried out only once the decision it follows from is. One
        // exception (R63): a SIGKILL the persisted state says is due (the
        // grace spent, its stop signal sent) goes out though its own
        // write-ahead could not be written.
        if !t.removed {
            let signalled = |c: u8| t.kill.signalled.get(usize::from(c)) == Some(&true);
            let (lc, _) = t
                .last
                .as_ref()
                .ok_or_else(|| fail("carried out before anything was persisted".into()))?;
            let stage = |i: u8| lc.containers().get(usize::from(i)).map(Container::stage);
            let persisted = match action {
                Action::RemoveEndpoints => lc.record().deletion_timestamp.is_some(),
                Action::RunPreStop { container, .. } => {
                    !matches!(stage(container), None | Some(Stage::Running))
                }
                Action::SendStopSignal { container } => matches!(
                    stage(container),
                    Some(Stage::Stopping { .. } | Stage::Killed | Stage::Stopped)
                ),
                Action::SendKill { container } => match stage(container) {
                    Some(Stage::Killed | Stage::Stopped) => true,
                    Some(Stage::Stopping { kill_at }) => {
                        kill_at <= now.mono && signalled(container)
                    }
                    _ => false,
                },
                Action::ContainerStopped { container } => {
                    matches!(stage(container), Some(Stage::Stopped))
                }
                Action::Remove { .. } => false,
                other => panic!("unknown to the checker: {other:?}"),
            };
            if !persisted {
                return Err(fail(format!(
                    "invariant 7: carried out before it was persisted; last persisted: {lc:?}"
                )));
            }
        }
        let now_ms = now.mono.as_millis();
        match action {
            Action::SendStopSignal { container } => {
                let container = usize::from(container);
                if let Some(s) = t.kill.signalled.get_mut(container) {
                    *s = true;
                }
                // A removed record's decisions are no longer persisted.
                if let Some(slot) = t.kill.signal.get_mut(container)
                    && t.removed
                    && slot.is_none()
                {
                    *slot = Some(now_ms);
                }
            }
            Action::SendKill { container } => {
                let container = usize::from(container);
                if !t.kill.signalled.get(container).copied().unwrap_or(false) {
                    return Err(fail(
                        "SIGTERM skipped: no stop signal was sent first".into(),
                    ));
                }
                let signal = t
                    .kill
                    .signal
                    .get(container)
                    .copied()
                    .flatten()
                    .ok_or_else(|| fail("no stop signal was decided".into()))?;
                if now_ms < signal.saturating_add(MIN_STOP_MS) {
                    return Err(fail(format!(
                        "R62: SIGKILL at {now_ms} ms, stop signal decided at {signal} ms"
                    )));
                }
                let earliest = t
                    .kill
                    .earliest
                    .ok_or_else(|| fail("SIGKILL before the kill started".into()))?;
                if now_ms < earliest {
                    return Err(fail(format!(
                        "invariant 3/D6: SIGKILL at {now_ms} ms, budget spent at {earliest} ms"
                    )));
                }
            }
            Action::RemoveEndpoints
            | Action::RunPreStop { .. }
            | Action::ContainerStopped { .. }
            | Action::Remove { .. } => {}
            other => panic!("unknown to the checker: {other:?}"),
        }
        Ok(())
    }

    /// After every step: the log holds every write the store applied (as
    /// many as the store's revision counts), and no accepted deletion is
    /// lost (invariant 7): the last write of an accepted object that is
    /// still stored has a deletion timestamp (a later write without one
    /// already failed invariant 2). Read from the log, which is what the
    /// store applied, write by write; [`Checker::end`] compares it with a
    /// listing of the store.
    pub fn store(&self, store: &impl Store) -> Result<(), String> {
        let revision = store.revision().map_err(|e| e.to_string())?.get();
        if revision != self.writes {
            return Err(format!(
                "harness: the store applied {revision} writes, the log holds {}",
                self.writes
            ));
        }
        for (uid, t) in &self.objects {
            if t.accepted && !t.removed && t.ts.is_none() {
                return Err(format!(
                    "invariant 7: {} ({uid}): an accepted deletion is lost: no deletion timestamp stored",
                    t.name
                ));
            }
        }
        Ok(())
    }

    /// The store holds what the log says: the same uid under each name,
    /// and a deletion timestamp on every object whose deletion was accepted.
    fn listing_agrees(&self, listing: &Listing) -> Result<(), String> {
        let stored: BTreeMap<&str, &str> = listing
            .objects
            .iter()
            .map(|(n, o, _)| (n.as_str(), o.uid()))
            .collect();
        let logged: BTreeMap<&str, &str> = self
            .names
            .iter()
            .map(|(n, u)| (n.as_str(), u.as_str()))
            .collect();
        if stored != logged {
            return Err(format!(
                "harness: the store holds {stored:?}, the log says {logged:?}"
            ));
        }
        for (name, object, _) in &listing.objects {
            let t = self.objects.get(object.uid()).ok_or("untracked uid")?;
            if t.accepted && object.record.deletion_timestamp.is_none() {
                return Err(format!(
                    "invariant 7: {name} ({}): an accepted deletion is lost: no deletion timestamp stored",
                    object.uid()
                ));
            }
        }
        Ok(())
    }

    /// At the end, after the final drive: every deletion completed, every
    /// eviction stopped its workload, and the runtime tracks what is stored.
    pub fn end(
        &self,
        store: &impl Store,
        tracked: impl Fn(&str) -> Option<ObjectLifecycle>,
    ) -> Result<(), String> {
        self.store(store)?;
        let listing = store.list().map_err(|e| e.to_string())?;
        self.listing_agrees(&listing)?;
        for (name, object, _) in listing.objects {
            let uid = object.uid();
            if object.record.deletion_timestamp.is_some() {
                return Err(format!(
                    "liveness: {name} ({uid}) is still stored with a deletion timestamp: {object:?}"
                ));
            }
            let Some(lc) = tracked(&name) else {
                return Err(format!(
                    "liveness: {name} ({uid}) is stored but the runtime does not track it"
                ));
            };
            if lc.record().uid.as_str() != uid {
                return Err(format!(
                    "liveness: {name}: the runtime tracks {}, the store holds {uid}",
                    lc.record().uid
                ));
            }
            let evicted = self.objects.get(uid).is_some_and(|t| t.evicted);
            let (_, persisted) = persisted(&object).map_err(|e| format!("{name}: {e}"))?;
            let running = persisted
                .containers()
                .iter()
                .any(|c| c.stage() != Stage::Stopped);
            if evicted && running {
                return Err(format!(
                    "liveness: {name} ({uid}) was evicted but its workload still runs: {persisted:?}"
                ));
            }
        }
        for (uid, t) in &self.objects {
            if t.accepted && !t.removed {
                return Err(format!(
                    "liveness: the accepted deletion of {} ({uid}) never completed",
                    t.name
                ));
            }
        }
        Ok(())
    }
}
