//! The flash store (feature `flash`) on sequential-storage's mock NOR
//! flash: a scripted run of four pods (a graceful delete, a delete held by
//! a finalizer, a force delete, a live pod), every change written ahead of
//! its actions; then the power is cut inside every write and erase of the
//! run (its first byte, its last, every 7th in between) and the board restarts
//! from what the flash holds. After every cut: no acknowledged deletion is
//! lost, no deadline is later than before (D6: none of the old boot's
//! survives, as its workloads died with it), kills in flight finish, and a
//! record held by a finalizer stays. The flash's wear over the run is
//! printed (`cargo test -p grace-core --features flash --test flash -- --nocapture`).
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]
#![cfg(feature = "flash")]

use std::collections::BTreeMap;

use embassy_futures::block_on;
use grace_core::Input;
use grace_core::flash::{FlashStore, UidKey};
use grace_core::{
    Action, ContainerSpec, DeleteOptions, Id, Instant, Lifecycle, Name, Now, Record, Stage,
    Strategy, Table, WallTime,
};
use sequential_storage::cache::Cache;
use sequential_storage::map::{MapConfig, MapStorage};
use sequential_storage::mock_flash::{MockFlashBase, WriteCountCheck};

/// 8 pages of 1 KiB, 4-byte words.
type Flash = MockFlashBase<8, 4, 256>;
type Lc = Lifecycle<2, 1>;
type Uncached = Cache<
    sequential_storage::cache::Uncached,
    sequential_storage::cache::Uncached,
    sequential_storage::cache::Uncached,
    UidKey,
>;
type Store = FlashStore<Flash, Uncached, 512>;

const PAGES: u64 = 8;

/// Wall clock at the first boot, in unix ms.
const WALL0: i64 = 1_700_000_000_000;

fn at(ms: u64) -> Now {
    Now::new(
        WallTime::from_unix_millis(WALL0 + i64::try_from(ms).expect("small")),
        Instant::from_millis(ms),
    )
}

fn name(s: &str) -> Name {
    Name::try_from(s).expect("short")
}

fn store_over(flash: Flash) -> Store {
    let config = const { MapConfig::new(0..8 * 1024) };
    FlashStore::new(MapStorage::new(flash, config, Cache::new_uncached()))
}

/// One scripted input.
#[derive(Clone, Copy, Debug)]
enum Step {
    Delete(&'static str, i64),
    Sync(&'static str),
    Exit(&'static str),
    /// Handle every deadline at or before this instant.
    Timeout,
}

const UIDS: [&str; 4] = ["web", "kept", "forced", "live"];

/// The run, at these milliseconds of the first boot.
const SCRIPT: [(u64, Step); 9] = [
    (0, Step::Delete("web", 2)),
    (0, Step::Delete("kept", 1)),
    (100, Step::Sync("web")),
    (100, Step::Sync("kept")),
    (200, Step::Delete("forced", 0)),
    (300, Step::Exit("kept")),
    (400, Step::Sync("forced")),
    (2_100, Step::Timeout),
    (2_400, Step::Timeout),
];

fn pod(uid: &str) -> Lc {
    let mut record = Record::new(name(uid));
    if uid == "kept" {
        record
            .finalizers
            .push(name("example.com/keep"))
            .expect("room");
    }
    Lifecycle::new(Strategy::POD, record, &[ContainerSpec::default()]).expect("fits")
}

/// The state of one object on flash as far as the run knows it.
#[derive(Clone, Debug, PartialEq)]
enum Known {
    Stored(Box<Lc>),
    Erased,
}

/// A flash operation of the run, with what it writes.
#[derive(Clone, Debug)]
struct Op {
    uid: &'static str,
    after: Known,
    /// Bytes the flash had consumed (written or erased) when it began and
    /// when it ended.
    bytes: (u64, u64),
}

/// What a run did before it stopped.
struct Run {
    /// Completed operations, in order.
    done: Vec<Op>,
    /// The operation the power cut interrupted.
    cut: Option<Op>,
    store: Store,
}

const BUDGET: u32 = u32::MAX;

fn consumed(store: &mut Store) -> u64 {
    let left = store.map().flash().bytes_until_shutoff.unwrap_or(0);
    u64::from(BUDGET - left)
}

/// Writes (or erases) one object, recording the operation; `Err` once the
/// power is cut.
fn persist(run: &mut Run, uid: &'static str, now: Option<&Lc>) -> Result<(), ()> {
    let start = consumed(&mut run.store);
    let result = match now {
        Some(l) => block_on(run.store.store(l)),
        None => block_on(run.store.erase(&name(uid))),
    };
    let after = now.map_or(Known::Erased, |l| Known::Stored(Box::new(l.clone())));
    let end = consumed(&mut run.store);
    let op = Op {
        uid,
        after,
        bytes: (start, end),
    };
    match result {
        Ok(()) => {
            run.done.push(op);
            Ok(())
        }
        Err(_) => {
            run.cut = Some(op);
            Err(())
        }
    }
}

fn id_of(table: &Table<4, 2, 1>, uid: &str) -> Option<Id> {
    table
        .iter()
        .find(|(_, l)| l.record().uid.as_str() == uid)
        .map(|(id, _)| id)
}

/// The scripted run over `flash`, cut once `cut_after` bytes are consumed
/// (`None`: never).
fn run_script(flash: Flash, cut_after: Option<u32>) -> Run {
    let mut flash = flash;
    flash.bytes_until_shutoff = Some(cut_after.unwrap_or(BUDGET));
    let mut run = Run {
        done: Vec::new(),
        cut: None,
        store: store_over(flash),
    };
    let _ = script(&mut run);
    run
}

fn script(run: &mut Run) -> Result<(), ()> {
    let mut table: Table<4, 2, 1> = Table::new();
    for uid in UIDS {
        let lifecycle = pod(uid);
        persist(run, uid, Some(&lifecycle))?;
        table.insert(lifecycle).map_err(|_| ())?;
    }
    for (ms, step) in SCRIPT {
        let now = at(ms);
        let before: BTreeMap<_, _> = table
            .iter()
            .map(|(_, l)| (l.record().uid.as_str().to_owned(), l.clone()))
            .collect();
        let _ = match step {
            Step::Delete(uid, grace) => {
                let id = id_of(&table, uid).expect("in the table");
                table
                    .handle(now, id, Input::Delete(DeleteOptions::with_grace(grace)))
                    .map(|_| ())
                    .map_err(|_| ())
            }
            Step::Sync(uid) => {
                let id = id_of(&table, uid).expect("in the table");
                table
                    .handle(now, id, Input::AgentSync)
                    .map(|_| ())
                    .map_err(|_| ())
            }
            Step::Exit(uid) => {
                let id = id_of(&table, uid).expect("in the table");
                table
                    .handle(now, id, Input::container_exited(0))
                    .map(|_| ())
                    .map_err(|_| ())
            }
            Step::Timeout => {
                table.handle_timeouts(now);
                Ok(())
            }
        };
        // Write-ahead: every changed lifecycle before any action is taken.
        for uid in UIDS {
            let Some(id) = id_of(&table, uid) else {
                continue;
            };
            let now_state = table.get(id).expect("present").clone();
            if before.get(uid) != Some(&now_state) {
                persist(run, uid, Some(&now_state))?;
            }
        }
        // The actions; a SIGKILL ends the process at once.
        let mut killed = Vec::new();
        while let Some((id, action)) = table.poll_action() {
            if let Action::SendKill { .. } = action {
                killed.push(id);
            }
        }
        for id in killed {
            let _ = table.handle(now, id, Input::container_exited(0));
            let uid = table.get(id).expect("present").record().uid.clone();
            let state = table.get(id).expect("present").clone();
            let uid = UIDS
                .into_iter()
                .find(|u| *u == uid.as_str())
                .expect("known");
            persist(run, uid, Some(&state))?;
            while table.poll_action().is_some() {}
        }
        // Finished objects leave the table, then the flash.
        for uid in UIDS {
            if let Some(id) = id_of(&table, uid)
                && table.remove_finished(id).is_some()
            {
                persist(run, uid, None)?;
            }
        }
    }
    Ok(())
}

fn deleting(l: &Lc) -> bool {
    l.record().deletion_timestamp.is_some() || !l.is_stored()
}

/// Restarts from `flash` and checks what comes back against what the run
/// had acknowledged (`done`) and the operation cut (`cut`).
fn check_restart(done: &[Op], cut: Option<&Op>, flash: Flash, label: &str) {
    let mut flash = flash;
    flash.bytes_until_shutoff = None;
    let mut store = store_over(flash);
    let mut table: Table<4, 2, 1> = Table::new();
    // Another boot: its monotonic clock starts again at 0.
    let boot = Now::new(
        WallTime::from_unix_millis(WALL0 + 10_000),
        Instant::from_millis(0),
    );
    let restored = block_on(store.restore(boot, &mut table))
        .unwrap_or_else(|e| panic!("{label}: restore failed: {e:?}"));

    let mut acked: BTreeMap<&str, Known> = BTreeMap::new();
    for op in done {
        acked.insert(op.uid, op.after.clone());
    }
    let mut deleting_count = 0;
    for uid in UIDS {
        let back = id_of(&table, uid).map(|id| table.get(id).expect("present").clone());
        let known = acked.get(uid);
        let pending = cut.filter(|op| op.uid == uid).map(|op| &op.after);
        // What another boot makes of a stored state: its deleting
        // containers are gone (the module's documented D6 behaviour).
        let rebooted = |l: &Lc| {
            let mut l = l.clone();
            if deleting(&l) || l.agent().killing {
                for i in 0..l.containers().len() {
                    let _ = l.handle(boot, Input::container_exited(i)).container();
                }
            }
            l
        };
        let matches = |k: Option<&Known>, b: &Option<Lc>| match (k, b) {
            (None | Some(Known::Erased), None) => true,
            (Some(Known::Stored(l)), Some(b)) => rebooted(l) == *b,
            _ => false,
        };
        assert!(
            matches(known, &back) || pending.is_some_and(|p| matches(Some(p), &back)),
            "{label}: {uid} came back as {back:?}, acknowledged {known:?}, cut while writing {pending:?}"
        );
        // No acknowledged deletion is lost.
        if let Some(Known::Stored(l)) = known
            && deleting(l)
        {
            let erasing = matches!(pending, Some(Known::Erased));
            assert!(
                back.as_ref().is_some_and(deleting) || (back.is_none() && erasing),
                "{label}: {uid}'s deletion was lost: {back:?}"
            );
        }
        let Some(back) = back else { continue };
        // D6: no deadline of the old boot survives, so none is later.
        assert_eq!(back.poll_timeout(), None, "{label}: {uid} kept a deadline");
        if deleting(&back) {
            deleting_count += 1;
            // What ran before the reset is gone: the kill is over.
            assert!(
                back.containers()
                    .iter()
                    .all(|c| c.stage() == Stage::Stopped),
                "{label}: {uid} still has a container running: {back:?}"
            );
        }
        if uid == "live" {
            assert!(!deleting(&back), "{label}: the live pod came back deleted");
        }
        if uid == "kept" {
            assert!(back.is_stored(), "{label}: the finalizer's record is gone");
        }
    }
    assert_eq!(restored.objects, table.len(), "{label}");
    assert_eq!(restored.deleting, deleting_count, "{label}");

    // The agent syncs after the boot: every deletion without a finalizer
    // ends (the final delete, R75); the finalizer's record stays.
    let ids: Vec<Id> = table.iter().map(|(id, _)| id).collect();
    for id in ids {
        let _ = table.handle(boot, id, Input::AgentSync);
        while table.poll_action().is_some() {}
        let l = table.get(id).expect("present");
        let uid = l.record().uid.as_str().to_owned();
        if deleting(l) && uid != "kept" {
            assert!(l.is_finished(), "{label}: {uid} did not finish: {l:?}");
        }
        if uid == "kept" {
            assert!(l.is_stored() && !l.is_finished(), "{label}: kept");
        }
    }
}

fn fresh_flash() -> Flash {
    Flash::new(WriteCountCheck::Twice, None, true)
}

/// Runs `objects` pods through a whole deletion on `flash` (written Live,
/// deleting, killing, then erased), as a board does over its life.
fn age(flash: Flash, objects: usize) -> Flash {
    let mut store = store_over(flash);
    for n in 0..objects {
        let mut l = pod(&format!("old-{n}"));
        block_on(store.store(&l)).expect("room");
        let _ = l
            .handle(at(0), Input::Delete(DeleteOptions::with_grace(5)))
            .delete()
            .unwrap();
        block_on(store.store(&l)).expect("room");
        let _ = l.handle(at(10), Input::AgentSync).handled();
        block_on(store.store(&l)).expect("room");
        block_on(store.erase(&l.record().uid)).expect("erased");
    }
    store.into_inner().destroy().0
}

/// A flash aged so that the scripted run reclaims pages (erases) midway.
fn aged_flash() -> Flash {
    age(fresh_flash(), 34)
}

#[test]
fn d6_restart_after_a_full_run_keeps_the_finalizers_record_and_the_live_pod() {
    let run = run_script(fresh_flash(), None);
    assert!(run.cut.is_none());
    // The finished objects were erased: only the held and the live ones stay.
    let last: BTreeMap<_, _> = run.done.iter().map(|op| (op.uid, &op.after)).collect();
    assert_eq!(last["web"], &Known::Erased);
    assert_eq!(last["forced"], &Known::Erased);
    assert!(matches!(last["kept"], Known::Stored(_)));
    let flash = run.store.into_inner().destroy().0;
    check_restart(&run.done, None, flash, "full run");
}

/// Cuts the power inside every operation of the scripted run on flashes
/// made by `flash`; returns how many cuts.
fn cut_everywhere(flash: fn() -> Flash, what: &str) -> usize {
    let full = run_script(flash(), None);
    assert!(full.cut.is_none());
    let mut cuts = 0;
    for (k, op) in full.done.iter().enumerate() {
        let (start, end) = op.bytes;
        assert!(end > start, "operation {k} wrote nothing");
        // Its first byte, its last, and every 7th in between.
        let cuts_here = (start..end).filter(|b| (b - start) % 7 == 0 || *b == end - 1);
        for cut in cuts_here {
            let run = run_script(flash(), Some(u32::try_from(cut).expect("small")));
            let interrupted = run.cut.clone().expect("the power was cut");
            assert_eq!(run.done.len(), k, "cut at byte {cut} hit operation {k}");
            assert_eq!(interrupted.uid, op.uid);
            let flash = run.store.into_inner().destroy().0;
            let label = format!(
                "{what}: cut at byte {cut}, inside operation {k} ({})",
                op.uid
            );
            check_restart(&run.done, Some(&interrupted), flash, &label);
            cuts += 1;
        }
    }
    assert!(cuts >= 2 * full.done.len());
    cuts
}

#[test]
fn d6_power_cut_inside_every_write_loses_no_deletion_and_no_deadline_moves_later() {
    let cuts = cut_everywhere(fresh_flash, "fresh flash");
    println!("fresh flash: {cuts} power cuts, each followed by a restart: no deletion lost");
}

#[test]
fn d6_power_cut_while_pages_are_reclaimed_loses_no_deletion() {
    // The aged flash reclaims pages during the run: the cuts land inside
    // page erases and item moves too.
    let before = aged_flash().stats_snapshot();
    let mut full = run_script(aged_flash(), None).store;
    let during = before.compare_to(full.map().flash().stats_snapshot());
    assert!(during.erases > 0, "no page was reclaimed during the run");
    let cuts = cut_everywhere(aged_flash, "aged flash");
    println!(
        "aged flash: {} page erases during the run; {cuts} power cuts, each followed by a restart: no deletion lost",
        during.erases
    );
}

#[test]
fn flash_wear_over_many_deletions_is_reported() {
    const OBJECTS: usize = 1_000;
    let flash = age(fresh_flash(), OBJECTS);
    let wear = fresh_flash()
        .stats_snapshot()
        .compare_to(flash.stats_snapshot());
    // Four operations per object; the map cycles through its pages, so
    // each page is erased about erases / PAGES times.
    println!(
        "flash wear: {OBJECTS} deletions ({} operations) on {PAGES} pages of 1 KiB: {} page erases \
         ({:.1} per page, {:.2} per deletion), {} bytes written ({:.0} per deletion)",
        OBJECTS * 4,
        wear.erases,
        wear.erases as f64 / PAGES as f64,
        wear.erases as f64 / OBJECTS as f64,
        wear.bytes_written,
        wear.bytes_written as f64 / OBJECTS as f64,
    );
    assert!(wear.erases > PAGES, "the pages were reused");
    // Nothing of the finished objects comes back.
    let mut store = store_over(flash);
    let mut table: Table<4, 2, 1> = Table::new();
    let restored = block_on(store.restore(at(0), &mut table)).expect("restores");
    assert_eq!(restored.objects, 0);
}

#[test]
fn uid_key_round_trips_and_refuses_garbage() {
    use sequential_storage::map::Key;
    let key = UidKey(name("pod-uid-1"));
    let mut buffer = [0u8; 80];
    let len = key.serialize_into(&mut buffer).expect("fits");
    assert_eq!(len, 10);
    assert_eq!(<UidKey>::deserialize_from(&buffer[..len]), Ok((key, 10)));
    assert!(<UidKey>::deserialize_from(&[200, b'a']).is_err());
    assert!(<UidKey>::deserialize_from(&[2, 0xff, 0xfe]).is_err());
    assert!(<UidKey>::deserialize_from(&[]).is_err());
}

/// A table of small names (`SMALL_NAME_CAPACITY`, as the docs recommend on
/// a microcontroller) stores and restores through a `FlashStore` of the
/// same capacity, on the mock flash: a deletion under way comes back with
/// its kill finished (D6), a live pod as it was; a uid the capacity cannot
/// hold is refused by the key.
#[test]
fn d6_flash_store_keeps_small_names_across_a_restart() {
    use grace_core::{InlineName, SMALL_NAME_CAPACITY};
    const S: usize = SMALL_NAME_CAPACITY;
    type SmallLc = Lifecycle<2, 1, S>;
    type SmallCache = Cache<
        sequential_storage::cache::Uncached,
        sequential_storage::cache::Uncached,
        sequential_storage::cache::Uncached,
        UidKey<S>,
    >;
    type SmallStore = FlashStore<Flash, SmallCache, 256, S>;
    let small = |s: &str| InlineName::<S>::try_from(s).expect("short");
    let small_pod = |uid: &str| -> SmallLc {
        Lifecycle::new(
            Strategy::POD,
            Record::new(small(uid)),
            &[ContainerSpec::default()],
        )
        .expect("fits")
    };
    let over = |flash: Flash| -> SmallStore {
        let config = const { MapConfig::new(0..8 * 1024) };
        FlashStore::new(MapStorage::new(flash, config, Cache::new_uncached()))
    };

    // The first boot: a live pod, a pod being deleted (SIGTERM sent), a
    // finished one erased.
    let mut store = over(fresh_flash());
    let live = small_pod("live");
    let mut web = small_pod("web");
    let mut gone = small_pod("gone");
    block_on(store.store(&live)).expect("stored");
    web.handle(at(0), Input::Delete(DeleteOptions::with_grace(30)))
        .delete()
        .unwrap()
        .expect("deleted");
    web.handle(at(10), Input::AgentSync).handled();
    block_on(store.store(&web)).expect("stored");
    block_on(store.store(&gone)).expect("stored");
    gone.handle(at(20), Input::Delete(DeleteOptions::with_grace(0)))
        .delete()
        .unwrap()
        .expect("deleted");
    block_on(store.erase(&gone.record().uid)).expect("erased");

    // Another boot: the clock starts again.
    let flash = store.into_inner().destroy().0;
    let mut store = over(flash);
    let mut table: Table<4, 2, 1, S> = Table::new();
    let restored = block_on(store.restore(at(5), &mut table)).expect("restores");
    assert_eq!(restored.objects, 2);
    assert_eq!(restored.deleting, 1);
    let find = |uid: &str| {
        table
            .iter()
            .find(|(_, l)| l.record().uid.as_str() == uid)
            .map(|(_, l)| l.clone())
    };
    assert_eq!(find("live"), Some(live));
    assert_eq!(find("gone"), None);
    let web = find("web").expect("restored");
    assert_eq!(web.containers()[0].stage(), Stage::Stopped);
    assert_eq!(web.poll_timeout(), None, "no deadline of the old boot");

    // The key holds what the capacity holds, one length byte first.
    use sequential_storage::map::Key;
    let longest = "x".repeat(S);
    let key = UidKey(small(&longest));
    let mut buffer = [0u8; 1 + S];
    assert_eq!(key.serialize_into(&mut buffer), Ok(1 + S));
    assert_eq!(UidKey::<S>::deserialize_from(&buffer), Ok((key, 1 + S)));
    let mut too_long = [b'x'; 2 + S];
    too_long[0] = u8::try_from(S + 1).expect("small");
    assert!(UidKey::<S>::deserialize_from(&too_long).is_err());
}
