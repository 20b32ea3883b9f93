//! What only the etcd store does: leases and node liveness, fencing epochs,
//! several clients on one prefix, a watch that resumes after its client
//! lost the connection. The shared contract is checked in store_suite.rs.
//!
//! Every test but the first needs a server: they are ignored unless asked
//! for, and read it from `GRACE_ETCD_ENDPOINTS` (see the README).
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
#![cfg(feature = "etcd")]

mod common;

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::actuators::Recorder;
use grace_core::{Action, DeleteOptions, Input, Name, Record};
use grace_std::api_server;
use grace_std::clock::{Clock, ManualClock};
use grace_std::runtime::{Observed, Recovery, Runtime, RuntimeError};
use grace_std::store::{
    EpochBump, EtcdOptions, EtcdStore, EventKind, FINALIZERS, NodeScoped, Revision, Store,
    StoreError, StorePreconditions, StoredObject, Watch, Write,
};

const NEEDS_ETCD: &str = "needs an etcd server";

/// How long a test waits for something that must happen.
const PATIENCE: Duration = Duration::from_secs(10);

fn obj(uid: &str) -> StoredObject {
    StoredObject::unscheduled(Record::<FINALIZERS>::new(
        Name::try_from(uid).expect("short uid"),
    ))
}

fn endpoints() -> Vec<String> {
    let endpoints = std::env::var("GRACE_ETCD_ENDPOINTS").expect(
        "the etcd tests need an etcd server: set GRACE_ETCD_ENDPOINTS, e.g. http://127.0.0.1:23790",
    );
    endpoints.split(',').map(|e| e.trim().to_owned()).collect()
}

/// A prefix of its own for each test.
fn fresh_prefix(test: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "/grace-test/{test}-{}-{nanos}-{}/",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A client of the test server on `prefix`.
fn client(prefix: &str) -> EtcdStore {
    EtcdStore::connect_with(EtcdOptions {
        prefix: prefix.to_owned(),
        ..EtcdOptions::new(endpoints())
    })
    .expect("etcd is reachable")
}

/// Reads `n` events, failing the test if they do not come.
fn take(watch: &mut Watch, n: usize) -> Vec<grace_std::store::Event> {
    (0..n)
        .map(|i| {
            watch
                .next_timeout(PATIENCE)
                .expect("watch works")
                .unwrap_or_else(|| panic!("event {i} of {n} did not come"))
        })
        .collect()
}

#[test]
fn an_unreachable_server_is_unavailable_at_connect() {
    // A port nobody listens on.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let options = EtcdOptions {
        connect_timeout: Duration::from_millis(500),
        request_timeout: Duration::from_millis(500),
        ..EtcdOptions::new([format!("http://127.0.0.1:{port}")])
    };
    let started = Instant::now();
    let err = EtcdStore::connect_with(options).expect_err("nothing listens there");
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    assert!(started.elapsed() < PATIENCE, "bounded by the timeouts");
}

#[test]
#[ignore = "needs an etcd server: set GRACE_ETCD_ENDPOINTS, e.g. http://127.0.0.1:23790"]
fn lease_expiry_makes_the_node_not_alive() {
    let s = client(&fresh_prefix("lease"));
    // Before the grant: a lease's TTL runs from when etcd granted it,
    // which on a loaded machine can be well before the calls return.
    let granted = Instant::now();
    let lapsing = s.grant_lease(Duration::from_secs(1)).expect(NEEDS_ETCD);
    let kept = s.grant_lease(Duration::from_secs(1)).unwrap();
    assert!(lapsing.ttl() >= Duration::from_secs(1), "{lapsing:?}");
    s.register_node("node-a", lapsing).unwrap();
    s.register_node("node-b", kept).unwrap();
    assert_eq!(s.alive_nodes().unwrap(), ["node-a", "node-b"]);

    // node-b's agent keeps its lease alive; node-a's has stopped.
    while s.alive_nodes().unwrap().contains(&"node-a".to_owned()) {
        assert!(
            granted.elapsed() < lapsing.ttl() + PATIENCE,
            "node-a outlived its lease"
        );
        s.keep_alive(kept).unwrap();
        thread::sleep(Duration::from_millis(200));
    }
    assert!(
        granted.elapsed() >= lapsing.ttl(),
        "not before the TTL ran out"
    );
    assert!(granted.elapsed() >= kept.ttl());
    assert_eq!(
        s.alive_nodes().unwrap(),
        ["node-b"],
        "kept alive past its TTL"
    );

    // The expired lease is gone for good.
    let gone = StoreError::NotFound {
        name: format!("lease {:x}", lapsing.id()),
    };
    assert_eq!(s.keep_alive(lapsing), Err(gone.clone()));
    assert_eq!(s.register_node("node-a", lapsing), Err(gone.clone()));
    assert_eq!(s.revoke_lease(lapsing), Err(gone));

    // A revoked lease takes its node with it at once.
    s.revoke_lease(kept).unwrap();
    assert_eq!(s.alive_nodes().unwrap(), Vec::<String>::new());
}

#[test]
#[ignore = "needs an etcd server: set GRACE_ETCD_ENDPOINTS, e.g. http://127.0.0.1:23790"]
fn a_restarted_agent_registers_its_node_again_under_a_new_lease() {
    let s = client(&fresh_prefix("reregister"));
    let old = s.grant_lease(Duration::from_secs(30)).expect(NEEDS_ETCD);
    s.register_node("node-a", old).unwrap();
    let new = s.grant_lease(Duration::from_secs(30)).unwrap();
    s.register_node("node-a", new).unwrap();
    // The old agent's lease ending does not take the node down.
    s.revoke_lease(old).unwrap();
    assert_eq!(s.alive_nodes().unwrap(), ["node-a"]);
    s.revoke_lease(new).unwrap();
    assert!(s.alive_nodes().unwrap().is_empty());
}

#[test]
#[ignore = "needs an etcd server: set GRACE_ETCD_ENDPOINTS, e.g. http://127.0.0.1:23790"]
fn fencing_epochs_move_forward_by_compare_and_swap() {
    let prefix = fresh_prefix("fencing");
    let (a, b) = (client(&prefix), client(&prefix));
    assert_eq!(a.fencing_epoch("node-a").expect(NEEDS_ETCD), 0);
    assert_eq!(
        a.bump_fencing_epoch("node-a", 0).unwrap(),
        EpochBump::Bumped(1)
    );
    // b saw 0 too, but a bumped first.
    assert_eq!(
        b.bump_fencing_epoch("node-a", 0).unwrap(),
        EpochBump::Stale(1)
    );
    assert_eq!(
        b.bump_fencing_epoch("node-a", 1).unwrap(),
        EpochBump::Bumped(2)
    );
    assert_eq!(a.fencing_epoch("node-a").unwrap(), 2);
    assert_eq!(
        a.bump_fencing_epoch("node-a", 1).unwrap(),
        EpochBump::Stale(2)
    );
    // Per node, and not a write of the store.
    assert_eq!(a.fencing_epoch("node-b").unwrap(), 0);
    assert_eq!(a.revision().unwrap(), Revision::ZERO);
}

#[test]
#[ignore = "needs an etcd server: set GRACE_ETCD_ENDPOINTS, e.g. http://127.0.0.1:23790"]
fn a_store_guarded_by_a_fencing_epoch_writes_nothing_once_the_node_is_fenced() {
    let prefix = fresh_prefix("guarded");
    let admin = client(&prefix);
    // Never fenced: epoch 0, no key yet.
    let epoch = admin.fencing_epoch("node-b").expect(NEEDS_ETCD);
    assert_eq!(epoch, 0);
    let agent = admin.with_fencing("node-b", epoch);
    let neighbour = admin.with_fencing("node-a", 0);

    // While the epoch holds, the guarded store writes like any other.
    let r1 = agent.create("x", obj("ux")).unwrap();
    let (x, _) = admin.get("x").unwrap().expect("created");
    let r2 = agent.update("x", x.clone(), r1).unwrap();
    let stored = admin.get("x").unwrap();
    let mut watch = admin.watch(r2).unwrap();

    assert_eq!(
        admin.bump_fencing_epoch("node-b", epoch).unwrap(),
        EpochBump::Bumped(1)
    );
    let fenced = StoreError::Fenced {
        node: "node-b".into(),
        epoch: 1,
    };
    assert_eq!(agent.update("x", x.clone(), r2), Err(fenced.clone()));
    assert_eq!(agent.create("y", obj("uy")), Err(fenced.clone()));
    let remove = StorePreconditions {
        uid: Some("ux".into()),
        revision: Some(r2),
    };
    assert_eq!(agent.delete("x", remove.clone()), Err(fenced.clone()));
    let batch = agent.batch(vec![Write::Create {
        name: "z".into(),
        object: obj("uz"),
    }]);
    assert_eq!(batch.map_err(|e| (e.index, e.error)), Err((None, fenced)));
    // Nothing landed: no revision, no event, the object as it was.
    assert_eq!(admin.revision().unwrap(), r2);
    assert_eq!(admin.get("x").unwrap(), stored);
    assert_eq!(admin.get("y").unwrap(), None);

    // Other nodes' guards and unguarded writers go on.
    let r3 = neighbour.update("x", x.clone(), r2).unwrap();
    let events = take(&mut watch, 1);
    assert_eq!(
        (events[0].kind, events[0].revision),
        (EventKind::Updated, r3)
    );
    // A new agent of the node, starting from the new epoch, writes again.
    let returned = admin.with_fencing("node-b", 1);
    let r4 = returned
        .delete(
            "x",
            StorePreconditions {
                revision: Some(r3),
                ..remove
            },
        )
        .unwrap();
    assert_eq!(admin.get("x").unwrap(), None);
    assert_eq!(admin.revision().unwrap(), r4);
}

#[test]
#[ignore = "needs an etcd server: set GRACE_ETCD_ENDPOINTS, e.g. http://127.0.0.1:23790"]
fn d7_a_runtime_on_a_fenced_node_takes_no_step_even_before_it_checks_its_epoch() {
    // The node agent reads its epoch again only now and then; what it does
    // meanwhile is held by the guard on every write of its runtime.
    let prefix = fresh_prefix("fenced-runtime");
    let store = client(&prefix);
    let clock = Arc::new(ManualClock::at_unix_millis(1_700_000_000_000));
    let recorder = Recorder::default();
    let epoch = store.fencing_epoch("node-a").expect(NEEDS_ETCD);
    let mut agent = Runtime::open(
        NodeScoped::new(store.with_fencing("node-a", epoch), "node-a"),
        Arc::clone(&clock),
        recorder.clone(),
        Recovery::default(),
    )
    .expect("runtime opens");
    let _ = api_server::create(&store, "web", common::pod("uid-1", false)).unwrap();
    assert_eq!(agent.observe("web").unwrap(), Observed::New);
    let _ = api_server::delete(&store, clock.now(), "web", &DeleteOptions::with_grace(10)).unwrap();
    assert_eq!(agent.observe("web").unwrap(), Observed::Changed);
    assert_eq!(
        recorder.take_actions(),
        [
            Action::RemoveEndpoints,
            Action::SendStopSignal { container: 0 }
        ]
    );
    let stopping = store.get("web").unwrap();

    // The node is fenced while its agent is not looking.
    assert_eq!(
        store.bump_fencing_epoch("node-a", epoch).unwrap(),
        EpochBump::Bumped(epoch + 1)
    );
    // SIGKILL falls due: its write is refused, so it is not sent.
    clock.advance(grace_core::Duration::from_millis(10_000));
    let err = agent.handle_timeouts().expect_err("the write is refused");
    assert!(
        matches!(err, RuntimeError::Store(StoreError::Fenced { ref node, epoch: e })
            if node == "node-a" && e == epoch + 1),
        "{err}"
    );
    assert_eq!(recorder.take_actions(), []);
    // Nor do the container's exit and the final delete land.
    let _ = agent.handle("web", Input::container_exited(0));
    assert_eq!(store.get("web").unwrap(), stopping);
}

#[test]
#[ignore = "needs an etcd server: set GRACE_ETCD_ENDPOINTS, e.g. http://127.0.0.1:23790"]
fn two_clients_on_one_prefix_see_each_others_writes_and_conflicts() {
    let prefix = fresh_prefix("two-clients");
    let (a, b) = (client(&prefix), client(&prefix));
    let mut watch_b = b.watch(Revision::ZERO).expect(NEEDS_ETCD);

    let r1 = a.create("x", obj("ux")).unwrap();
    let (seen, rev) = b.get("x").unwrap().expect("a's create");
    assert_eq!((seen.uid(), rev), ("ux", r1));
    let mut changed = seen.clone();
    changed.node = Some("node-b".into());
    let r2 = b.update("x", changed, r1).unwrap();
    // a still holds r1: its compare-and-swap loses.
    assert_eq!(
        a.update("x", obj("ux"), r1),
        Err(StoreError::Conflict {
            name: "x".into(),
            current: r2
        })
    );
    assert_eq!(
        a.create("x", obj("other")).unwrap_err(),
        StoreError::AlreadyExists {
            name: "x".into(),
            current: r2
        }
    );
    assert_eq!((a.revision().unwrap(), b.revision().unwrap()), (r2, r2));
    let events = take(&mut watch_b, 2);
    let seen: Vec<(EventKind, Revision)> = events.iter().map(|e| (e.kind, e.revision)).collect();
    assert_eq!(seen, [(EventKind::Created, r1), (EventKind::Updated, r2)]);

    // Both clients, two threads each, increment one counter by
    // read-modify-compare-and-swap: no increment is lost, and every write
    // takes the next revision.
    const THREADS_PER_CLIENT: usize = 2;
    const INCREMENTS: usize = 15;
    let start = a.get("x").unwrap().unwrap().0.record.generation;
    let workers: Vec<_> = [a.clone(), b.clone()]
        .into_iter()
        .flat_map(|s| std::iter::repeat_n(s, THREADS_PER_CLIENT))
        .map(|s| {
            thread::spawn(move || {
                let mut conflicts = 0;
                for _ in 0..INCREMENTS {
                    loop {
                        let (mut o, rev) = s.get("x").unwrap().unwrap();
                        o.record.generation += 1;
                        match s.update("x", o, rev) {
                            Ok(_) => break,
                            Err(StoreError::Conflict { .. }) => conflicts += 1,
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
                conflicts
            })
        })
        .collect();
    let conflicts: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
    let total = 2 * THREADS_PER_CLIENT * INCREMENTS;
    let (last, rev) = a.get("x").unwrap().unwrap();
    assert_eq!(
        last.record.generation - start,
        total as i64,
        "{conflicts} conflicts"
    );
    assert_eq!(rev, Revision(r2.get() + total as u64));
    let revs: Vec<u64> = take(&mut watch_b, total)
        .iter()
        .map(|e| e.revision.get())
        .collect();
    assert!(revs.iter().copied().eq(r2.get() + 1..=rev.get()));
}

#[test]
#[ignore = "needs an etcd server: set GRACE_ETCD_ENDPOINTS, e.g. http://127.0.0.1:23790"]
fn stores_on_different_prefixes_are_independent() {
    let (a, b) = (
        client(&fresh_prefix("apart-a")),
        client(&fresh_prefix("apart-b")),
    );
    let mut watch_b = b.watch(Revision::ZERO).expect(NEEDS_ETCD);
    assert_eq!(a.create("x", obj("ua")).unwrap(), Revision(1));
    assert_eq!(a.create("y", obj("ua2")).unwrap(), Revision(2));
    assert_eq!(b.create("x", obj("ub")).unwrap(), Revision(1));
    assert_eq!(b.get("x").unwrap().unwrap().0.uid(), "ub");
    assert_eq!(b.list().unwrap().objects.len(), 1);
    assert_eq!(take(&mut watch_b, 1)[0].object.uid(), "ub");
    assert_eq!(
        watch_b.next_timeout(Duration::from_millis(100)).unwrap(),
        None
    );
    // A prefix without its slash gets one: "/p" is not a prefix of "/p2/".
    let base = fresh_prefix("slash");
    let bare = client(base.trim_end_matches('/'));
    assert_eq!(bare.prefix(), base);
    let longer = client(&format!("{}2/", base.trim_end_matches('/')));
    longer.create("x", obj("u")).unwrap();
    assert_eq!(bare.list().unwrap().objects.len(), 0);
}

#[test]
#[ignore = "needs an etcd server: set GRACE_ETCD_ENDPOINTS, e.g. http://127.0.0.1:23790"]
fn a_listing_of_several_pages_is_one_snapshot() {
    const OBJECTS: usize = 1_100; // three pages
    let prefix = fresh_prefix("pages");
    let s = client(&prefix);
    let names: Vec<String> = (0..OBJECTS).map(|i| format!("o{i:04}")).collect();
    for chunk in names.chunks(50) {
        let writes = chunk
            .iter()
            .map(|name| Write::Create {
                name: name.clone(),
                object: obj("u"),
            })
            .collect();
        s.batch(writes).expect(NEEDS_ETCD);
    }
    // Another client keeps writing while the listing is read page by page.
    let stop = Arc::new(AtomicBool::new(false));
    let (first_write, written) = std::sync::mpsc::channel();
    let writer = {
        let (w, stop) = (client(&prefix), Arc::clone(&stop));
        thread::spawn(move || {
            let mut writes = 0;
            while !stop.load(Ordering::SeqCst) {
                let name = format!("o{:04}", writes % OBJECTS);
                let (o, rev) = w.get(&name).unwrap().unwrap();
                w.update(&name, o, rev).unwrap();
                if writes == 0 {
                    let _ = first_write.send(());
                }
                writes += 1;
            }
            writes
        })
    };
    written
        .recv_timeout(PATIENCE)
        .expect("the writer is writing");
    let listing = s.list().unwrap();
    stop.store(true, Ordering::SeqCst);
    let writes = writer.join().unwrap();
    let listed: Vec<&str> = listing.objects.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(listed, names, "every object once, in name order");
    let newest = listing.objects.iter().map(|(_, _, r)| *r).max().unwrap();
    assert_eq!(
        newest, listing.revision,
        "nothing newer than the snapshot ({writes} writes ran)"
    );
    assert!(s.revision().unwrap() > listing.revision || writes == 0);
}

#[test]
#[ignore = "needs an etcd server: set GRACE_ETCD_ENDPOINTS, e.g. http://127.0.0.1:23790"]
fn a_batch_too_big_for_one_etcd_transaction_writes_nothing() {
    let s = client(&fresh_prefix("big-batch"));
    let writes: Vec<Write> = (0..100)
        .map(|i| Write::Create {
            name: format!("o{i:03}"),
            object: obj(&format!("u{i}")),
        })
        .collect();
    match s.batch(writes) {
        // A server started with a larger --max-txn-ops takes it whole.
        Ok(revs) => assert_eq!(revs.len(), 100),
        Err(e) => {
            assert_eq!(e.index, None, "nobody's write in particular");
            assert!(
                matches!(&e.error, StoreError::Unavailable(m)
                    if m.message().contains("--max-txn-ops") && !m.message().contains("may or may not")),
                "{e}"
            );
            assert_eq!(s.revision().unwrap(), Revision::ZERO);
            assert!(s.list().unwrap().objects.is_empty());
        }
    }
}

#[test]
#[ignore = "needs an etcd server: set GRACE_ETCD_ENDPOINTS, e.g. http://127.0.0.1:23790"]
fn a_batch_of_max_batch_writes_fits_one_transaction_even_when_the_log_is_trimmed() {
    // The costliest batch: every write logged and the log trimmed too (the
    // retention is the batch's size, and one change came before).
    let s = EtcdStore::connect_with(EtcdOptions {
        prefix: fresh_prefix("max-batch"),
        log_retention: 62,
        ..EtcdOptions::new(endpoints())
    })
    .expect(NEEDS_ETCD);
    assert_eq!(s.max_batch(), 62, "etcd's default --max-txn-ops of 128");
    s.create("first", obj("u")).unwrap();
    let writes: Vec<Write> = (0..s.max_batch())
        .map(|i| Write::Create {
            name: format!("o{i:03}"),
            object: obj("u"),
        })
        .collect();
    let revisions = s.batch(writes).expect("a batch of max_batch writes fits");
    assert_eq!(revisions.len(), 62);
    assert_eq!(s.revision().unwrap(), Revision(63));
    // Change 1 has left the log; the 62 of the batch are there.
    assert!(matches!(
        s.watch(Revision(0)),
        Err(StoreError::Compacted { .. })
    ));
    assert_eq!(take(&mut s.watch(Revision(1)).unwrap(), 62).len(), 62);
}

#[test]
#[ignore = "needs an etcd server: set GRACE_ETCD_ENDPOINTS, e.g. http://127.0.0.1:23790"]
fn a_watch_behind_a_batch_longer_than_the_log_is_told_it_is_compacted() {
    let s = EtcdStore::connect_with(EtcdOptions {
        prefix: fresh_prefix("outrun"),
        log_retention: 3,
        ..EtcdOptions::new(endpoints())
    })
    .expect(NEEDS_ETCD);
    let mut w = s.watch(Revision::ZERO).unwrap();
    // Caught up: waiting on etcd's watch of the log.
    assert_eq!(w.next_timeout(Duration::from_millis(50)).unwrap(), None);
    let writes = (0..5)
        .map(|i| Write::Create {
            name: format!("o{i}"),
            object: obj("u"),
        })
        .collect();
    assert_eq!(s.batch(writes).unwrap().len(), 5);
    // Changes 1 and 2 were never logged: the watch must not skip them.
    assert_eq!(
        w.next_timeout(PATIENCE),
        Err(StoreError::Compacted {
            requested: Revision::ZERO,
            compacted: Revision(2)
        })
    );
    let revs: Vec<u64> = take(&mut s.watch(Revision(2)).unwrap(), 3)
        .iter()
        .map(|e| e.revision.get())
        .collect();
    assert_eq!(revs, [3, 4, 5]);
}

#[test]
#[ignore = "needs an etcd server: set GRACE_ETCD_ENDPOINTS, e.g. http://127.0.0.1:23790"]
fn a_watch_resumes_after_its_client_reconnects_with_nothing_missed() {
    let proxy = Proxy::start(server_address());
    let prefix = fresh_prefix("reconnect");
    let watcher = EtcdStore::connect_with(EtcdOptions {
        prefix: prefix.clone(),
        request_timeout: Duration::from_secs(2),
        ..EtcdOptions::new([format!("http://{}", proxy.address)])
    })
    .expect(NEEDS_ETCD);
    let writer = client(&prefix);

    let mut w = watcher.watch(Revision::ZERO).unwrap();
    let r1 = writer.create("a", obj("ua")).unwrap();
    assert_eq!(take(&mut w, 1)[0].revision, r1);

    // The watcher's connection drops; the writer goes on meanwhile.
    proxy.cut();
    let r2 = writer.create("b", obj("ub")).unwrap();
    let r3 = writer.update("a", obj("ua"), r1).unwrap();
    let r4 = writer.delete("b", Default::default()).unwrap();
    match w.next_timeout(Duration::from_millis(300)) {
        Ok(None) | Err(StoreError::Unavailable(_)) => {}
        other => panic!("nothing can arrive while cut off, got {other:?}"),
    }

    // Connected again: every change since the last one seen, once each.
    proxy.restore();
    let events = take(&mut w, 3);
    let seen: Vec<(EventKind, &str, Revision)> = events
        .iter()
        .map(|e| (e.kind, e.name.as_str(), e.revision))
        .collect();
    assert_eq!(
        seen,
        [
            (EventKind::Created, "b", r2),
            (EventKind::Updated, "a", r3),
            (EventKind::Deleted, "b", r4),
        ]
    );
    // And what comes later, through a fresh etcd watch.
    let r5 = writer.create("c", obj("uc")).unwrap();
    assert_eq!(take(&mut w, 1)[0].revision, r5);
    assert_eq!(w.next_timeout(Duration::from_millis(100)).unwrap(), None);
    assert!(proxy.connections() >= 2, "the watcher did reconnect");
}

/// The first server of `GRACE_ETCD_ENDPOINTS` as a socket address.
fn server_address() -> SocketAddr {
    let first = endpoints().into_iter().next().expect("an endpoint");
    let host = first
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    host.to_socket_addrs()
        .expect("endpoint resolves")
        .next()
        .expect("an address")
}

/// A TCP proxy in front of the server whose connections the test can cut.
struct Proxy {
    address: SocketAddr,
    state: Arc<ProxyState>,
}

struct ProxyState {
    up: AtomicBool,
    /// Both sockets of every connection made, to cut them.
    open: Mutex<Vec<TcpStream>>,
    accepted: AtomicU64,
}

impl Proxy {
    /// Listens on a free port; each connection is forwarded to `server`
    /// while the proxy is up, and closed at once while it is not. The
    /// listening thread lives as long as the test process.
    fn start(server: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let address = listener.local_addr().expect("bound");
        let state = Arc::new(ProxyState {
            up: AtomicBool::new(true),
            open: Mutex::new(Vec::new()),
            accepted: AtomicU64::new(0),
        });
        let shared = Arc::clone(&state);
        thread::spawn(move || {
            for incoming in listener.incoming() {
                let Ok(client) = incoming else { continue };
                if !shared.up.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(upstream) = TcpStream::connect(server) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                shared.accepted.fetch_add(1, Ordering::SeqCst);
                let sockets = (client.try_clone(), upstream.try_clone());
                let (Ok(client2), Ok(upstream2)) = sockets else {
                    continue;
                };
                {
                    let mut open = shared.open.lock().unwrap();
                    for s in [&client, &upstream] {
                        if let Ok(s) = s.try_clone() {
                            open.push(s);
                        }
                    }
                }
                thread::spawn(move || pump(client, upstream2));
                thread::spawn(move || pump(upstream, client2));
            }
        });
        Proxy { address, state }
    }

    /// Drops every connection and refuses new ones.
    fn cut(&self) {
        self.state.up.store(false, Ordering::SeqCst);
        for s in self.state.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Forwards new connections again.
    fn restore(&self) {
        self.state.up.store(true, Ordering::SeqCst);
    }

    /// How many connections were forwarded.
    fn connections(&self) -> u64 {
        self.state.accepted.load(Ordering::SeqCst)
    }
}

/// Copies one direction of a connection until either side closes, then
/// closes both.
fn pump(mut from: TcpStream, mut to: TcpStream) {
    let _ = io::copy(&mut from, &mut to);
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
