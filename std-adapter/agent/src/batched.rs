//! The agent's change requests: one decision ([`decide`]) for a request
//! alone ([`handle`]) or with others (group commit, [`serve_batch`]).
//!
//! Requests that are waiting together on the runtime thread are decided
//! one after another on one [`Batch`](crate::runtime::Batch) and made
//! durable by one commit (two store transactions: before and after the
//! actions), then each is answered: its own answer, exactly as if it had
//! been handled alone, once what it wrote is durable. A refused request
//! writes nothing; each request sees the ones before it. A request on an
//! object the batch already changed starts a new batch, so that every
//! precondition is checked against a stored revision.
//!
//! `GRACE_AGENT_GROUP_COMMIT=off` handles each request alone (one commit
//! or two per request): only for measuring what group commit gains.

use std::sync::mpsc;
use std::time::Duration as StdDuration;

use grace_core::DeleteError;

use crate::api::{ApiError, DeleteReport, ErrorKind, Reply, Request};
use crate::clock::Clock;
use crate::containers::start_all;
use crate::input::Input;
use crate::process::{ProcessActuator, WorldEvent};
use crate::runtime::{Answer, Batch, DeleteAnswer, Runtime, RuntimeError};
use crate::store::Store;

/// The environment variable that switches group commit off (`off`).
pub const GROUP_COMMIT_ENV: &str = "GRACE_AGENT_GROUP_COMMIT";

/// How long a batch waits for one more request after the last one came:
/// clients answered by the previous commit send their next request within
/// a few tens of microseconds, and joining this commit saves them a whole
/// commit (milliseconds) of waiting.
const LINGER: StdDuration = StdDuration::from_micros(150);

/// Whether group commit is on (the default) in this process's environment.
pub fn group_commit() -> bool {
    std::env::var(GROUP_COMMIT_ENV).map_or(true, |v| v != "off")
}

/// A request decided on a batch, waiting for the commit.
enum Decided {
    /// The answer, whatever the commit does: the request was refused and
    /// wrote nothing.
    Refused(Reply),
    /// The answer, once the commit succeeds.
    Done(String, Reply),
    /// A delete's answer, once the commit succeeds; then the garbage
    /// collector's turn (as for a delete handled alone).
    Deleted(String, Reply),
    /// An object created: answered with its revision once stored, then
    /// started if it is bound to this node.
    Applied { name: String, start: bool },
}

/// Handles `first` and the inputs that follow it without a pause as one
/// batch: change requests (where `requests` lets them in: otherwise each
/// is handled alone) and process events (exits, hooks returned), which
/// are inputs like any, so that the deletes that come while workloads are
/// exiting are made durable, and their stop signals sent, with the same
/// commit as those exits. Returns the input that ended the batch, if one
/// came: one for the next batch (a request on an object this one changed,
/// or past a full batch) or another input. One batch per call, so that the
/// caller handles deadlines between batches however busy the clients keep
/// it. Every request is answered before it returns; a process event that
/// could not be taken is reported in [`Served`], with the events to offer
/// again once the store takes writes (an exit lost would leave its
/// container running forever as far as the agent knows).
pub(super) fn serve_batch<S: Store, C: Clock>(
    rt: &mut Runtime<S, C, ProcessActuator>,
    first: Input,
    inputs: &mpsc::Receiver<Input>,
    node: &str,
    requests: bool,
) -> Served {
    let mut batch = rt.open_batch();
    let mut waiting = Vec::new();
    let mut events = 0_usize;
    let mut failed = None;
    let mut next = first;
    let rest = loop {
        match next {
            Input::Request(request, reply) if requests && batchable(&request) => {
                if batch.is_full() || name(&request).is_none_or(|n| batch.touches(n)) {
                    // For the next batch.
                    break Some(Input::Request(request, reply));
                }
                waiting.push((reply, decide(&mut batch, request, node)));
            }
            Input::World(event) => {
                if !batch.has_room_for(event.object()) {
                    break Some(Input::World(event));
                }
                events = events.saturating_add(1);
                if let Err(e) = batch.handle_world_event(event) {
                    failed.get_or_insert(e);
                }
            }
            other => break Some(other),
        }
        match following(inputs) {
            Some(input) => next = input,
            None => break None,
        }
    };
    let wrote = !batch.is_empty();
    let (committed, unwritten) = batch.commit_keeping_events();
    answer(rt, waiting, committed.as_ref().err(), node);
    let wrote = wrote && committed.is_ok();
    let failed = match (failed, committed) {
        (Some(e), _) => Some(e),
        (None, Err(e)) if events > 0 => Some(e),
        _ => None,
    };
    Served {
        rest,
        failed,
        unwritten,
        wrote,
    }
}

/// What [`serve_batch`] leaves to its caller.
pub(super) struct Served {
    /// The input that ended the batch, if one came.
    pub(super) rest: Option<Input>,
    /// Why a process event could not be taken, if one could not.
    pub(super) failed: Option<RuntimeError>,
    /// The process events not written (the store failed): to be offered
    /// again.
    pub(super) unwritten: Vec<WorldEvent>,
    /// Whether the batch wrote something (the store takes writes).
    pub(super) wrote: bool,
}

/// The next input if one is waiting or comes within [`LINGER`].
fn following(inputs: &mpsc::Receiver<Input>) -> Option<Input> {
    match inputs.try_recv() {
        Ok(input) => Some(input),
        Err(_) => inputs.recv_timeout(LINGER).ok(),
    }
}

/// Whether a request is decided in a batch (the others are handled
/// alone, between batches).
pub(super) fn batchable(request: &Request) -> bool {
    name(request).is_some()
}

/// The object a batchable request is about.
fn name(request: &Request) -> Option<&str> {
    match request {
        Request::Apply { name, .. }
        | Request::Delete { name, .. }
        | Request::RemoveFinalizer { name, .. } => Some(name),
        Request::Put { .. } | Request::Get { .. } | Request::Watch | Request::Status => None,
    }
}

/// Decides one change request on a batch: the agent's one dispatch of
/// change requests, alone ([`handle`]) or with others ([`serve_batch`]).
fn decide<S: Store, C: Clock>(
    batch: &mut Batch<'_, S, C, ProcessActuator>,
    request: Request,
    node: &str,
) -> Decided {
    match request.input() {
        Some(Ok((name, input))) => return decide_input(batch, name.to_owned(), input, node),
        Some(Err(e)) => return Decided::Refused(invalid(e.to_string())),
        None => {}
    }
    match request {
        Request::Apply { name, object } => {
            if let Err(e) = check_name(&name) {
                return Decided::Refused(invalid(e));
            }
            let mut object = *object;
            crate::containers::bind_unbound(&mut object, node);
            let start = object.node.as_deref() == Some(node);
            match batch.create(&name, object) {
                Ok(()) => Decided::Applied { name, start },
                Err(e) => Decided::Refused(error(&name, &e)),
            }
        }
        // Delete and RemoveFinalizer: inputs, above. Put: see `handle`.
        // Reads are served by the connection threads.
        Request::Delete { .. }
        | Request::RemoveFinalizer { .. }
        | Request::Put { .. }
        | Request::Get { .. }
        | Request::Watch
        | Request::Status => {
            Decided::Refused(invalid("not a change request decided on a batch".into()))
        }
    }
}

/// Decides one request that is a lifecycle input ([`Request::input`]) on
/// `name`, and its answer.
fn decide_input<S: Store, C: Clock>(
    batch: &mut Batch<'_, S, C, ProcessActuator>,
    name: String,
    input: grace_core::Input,
    node: &str,
) -> Decided {
    match batch.handle(&name, input) {
        Ok(Answer::Delete(answer)) => deleted(batch, name, answer, node),
        Ok(_) => Decided::Done(name, Reply::Updated),
        Err(e) => Decided::Refused(error(&name, &e)),
    }
}

/// A delete decided: the agent sees its own node's deletions at once (its
/// agent sync, in the same batch), and answers with the record (R33).
fn deleted<S: Store, C: Clock>(
    batch: &mut Batch<'_, S, C, ProcessActuator>,
    name: String,
    answer: DeleteAnswer,
    node: &str,
) -> Decided {
    if !answer.response.dry_run
        && batch
            .runtime()
            .object(&name)
            .is_some_and(|o| o.node.as_deref() == Some(node))
        && let Err(e) = batch.handle(&name, grace_core::Input::AgentSync)
    {
        // The delete stays, as when it is handled alone.
        return Decided::Done(name.clone(), error(&name, &e));
    }
    let dry_run = answer.response.dry_run;
    let reply = Reply::Deleted(DeleteReport {
        outcome: answer.response.outcome,
        record: answer.record,
        dry_run,
        force: answer.response.force,
    });
    if dry_run {
        Decided::Done(name, reply)
    } else {
        Decided::Deleted(name, reply)
    }
}

/// Decides one change request alone, on a batch of its own: the same
/// decision as in a batch of many ([`decide`]), made durable by its own
/// commit. Only [`Request::Put`], an update carried out as the steps it is
/// made of (see [`crate::update`]), is decided on the runtime itself.
pub(super) fn handle<S: Store, C: Clock>(
    rt: &mut Runtime<S, C, ProcessActuator>,
    request: Request,
    node: &str,
) -> Reply {
    if let Request::Put {
        name,
        object,
        merge,
    } = request
    {
        if let Err(e) = check_name(&name) {
            return invalid(e);
        }
        return crate::update::put(rt, &name, *object, merge, node)
            .unwrap_or_else(|e| error(&name, &e));
    }
    let mut batch = rt.open_batch();
    let decided = decide(&mut batch, request, node);
    let committed = batch.commit();
    let mut replies = settle(rt, vec![decided], committed.as_ref().err(), node);
    replies.pop().unwrap_or_else(|| invalid("no answer".into()))
}

/// Answers every request of a batch, after its commit (`failed`: why the
/// commit failed).
fn answer<S: Store, C: Clock>(
    rt: &mut Runtime<S, C, ProcessActuator>,
    waiting: Vec<(mpsc::SyncSender<Reply>, Decided)>,
    failed: Option<&RuntimeError>,
    node: &str,
) {
    let (senders, decided): (Vec<_>, Vec<_>) = waiting.into_iter().unzip();
    let replies = settle(rt, decided, failed, node);
    for (reply, sent) in senders.into_iter().zip(replies) {
        let _ = reply.send(sent);
    }
}

/// The answers of the requests of a batch, in their order, after its
/// commit (`failed`: why the commit failed); the objects created on this
/// node are started first.
fn settle<S: Store, C: Clock>(
    rt: &mut Runtime<S, C, ProcessActuator>,
    decided: Vec<Decided>,
    failed: Option<&RuntimeError>,
    node: &str,
) -> Vec<Reply> {
    // Started together once every answer is known (one commit for their
    // statuses); each apply is answered once its containers were started.
    let mut to_start = Vec::new();
    let mut answers = Vec::with_capacity(decided.len());
    for decided in decided {
        let sent = match (decided, failed) {
            (Decided::Refused(refused), _) => refused,
            (
                Decided::Done(name, _) | Decided::Deleted(name, _) | Decided::Applied { name, .. },
                Some(e),
            ) => error(&name, e),
            (Decided::Done(_, done), None) => done,
            (Decided::Deleted(name, done), None) => {
                // Retried at the next start if it fails now.
                let _ = crate::collect::collect(rt, node, Some(&name));
                done
            }
            (Decided::Applied { name, start: go }, None) => {
                let revision = rt.object(&name).map_or(0, |o| o.record.resource_version);
                if go {
                    to_start.push(name);
                }
                Reply::Applied { revision }
            }
        };
        answers.push(sent);
    }
    start_all(rt, to_start.iter().map(String::as_str));
    answers
}

/// The key (namespace and name) of a change request, checked as the
/// manifest readers check them.
fn check_name(name: &str) -> Result<(), String> {
    grace_std::store::ObjectKey::parse(name)
        .map(drop)
        .map_err(|e| format!("field `{}`: {e}", e.field()))
}

fn invalid(message: String) -> Reply {
    Reply::Error(ApiError {
        kind: ErrorKind::Invalid,
        message,
    })
}

/// A runtime error as the API reports it, kubectl's words where it has them.
fn error(name: &str, e: &RuntimeError) -> Reply {
    let (kind, message) = match e {
        RuntimeError::NotFound(_) | RuntimeError::Delete(DeleteError::NotFound) => {
            (ErrorKind::NotFound, format!("object \"{name}\" not found"))
        }
        RuntimeError::AlreadyExists(_) => (
            ErrorKind::AlreadyExists,
            format!("object \"{name}\" already exists"),
        ),
        RuntimeError::Delete(DeleteError::Conflict(c)) => {
            (ErrorKind::Conflict, format!("object \"{name}\": {c}"))
        }
        RuntimeError::Delete(d) => (ErrorKind::Invalid, format!("object \"{name}\": {d}")),
        RuntimeError::Update(u) => (ErrorKind::Invalid, format!("object \"{name}\": {u}")),
        RuntimeError::Store(s) => (ErrorKind::Internal, format!("store: {s}")),
        RuntimeError::UnknownContainer { .. }
        | RuntimeError::TooManyContainers { .. }
        | RuntimeError::InvalidName { .. }
        | RuntimeError::BatchFull { .. } => (ErrorKind::Invalid, e.to_string()),
        _ => (ErrorKind::Internal, e.to_string()),
    };
    Reply::Error(ApiError { kind, message })
}

#[cfg(test)]
mod tests {
    //! The agent's batches on a real redb store that notes, at each
    //! commit, which answers the clients have already received.

    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use grace_core::{DeleteOptions, Name, Preconditions, Record};

    use super::*;
    use crate::api::ErrorKind;
    use crate::clock::SystemClock;
    use crate::runtime::Recovery;
    use crate::store::{
        BatchError, Listing, RedbStore, Revision, StoreError, StoredObject, Watch, Write,
    };

    /// The clients' side of the requests: each answer as received, with
    /// the number of commits done when it was first seen.
    #[derive(Default)]
    struct Clients {
        waiting: Vec<(usize, mpsc::Receiver<Reply>)>,
        seen: Vec<(usize, Reply, usize)>,
    }

    impl Clients {
        fn look(&mut self, commits: usize) {
            for (i, rx) in &self.waiting {
                if let Ok(reply) = rx.try_recv() {
                    self.seen.push((*i, reply, commits));
                }
            }
        }
    }

    /// A redb store that, before each commit, looks at what the clients
    /// have received.
    #[derive(Clone)]
    struct Watched {
        inner: Arc<RedbStore>,
        commits: Arc<AtomicUsize>,
        clients: Arc<Mutex<Clients>>,
    }

    impl Watched {
        fn look(&self) {
            let commits = self.commits.load(Ordering::SeqCst);
            self.clients.lock().expect("not poisoned").look(commits);
        }
    }

    impl Store for Watched {
        fn get(&self, name: &str) -> Result<Option<(StoredObject, Revision)>, StoreError> {
            self.inner.get(name)
        }
        fn list(&self) -> Result<Listing, StoreError> {
            self.inner.list()
        }
        fn revision(&self) -> Result<Revision, StoreError> {
            self.inner.revision()
        }
        fn batch(&self, writes: Vec<Write>) -> Result<Vec<Revision>, BatchError> {
            self.look();
            let done = self.inner.batch(writes);
            self.commits.fetch_add(1, Ordering::SeqCst);
            done
        }
        fn watch(&self, from: Revision) -> Result<Watch, StoreError> {
            self.inner.watch(from)
        }
    }

    const NODE: &str = "local";

    /// A store holding one object per name, bound to `node`, with no
    /// container, and a runtime on it.
    fn setup(
        dir: &tempfile::TempDir,
        names: &[&str],
        node: &str,
    ) -> (Watched, Runtime<Watched, SystemClock, ProcessActuator>) {
        let store = Watched {
            inner: Arc::new(RedbStore::open(dir.path().join("grace.redb")).expect("opens")),
            commits: Arc::default(),
            clients: Arc::default(),
        };
        for name in names {
            let object = StoredObject::on_node(Record::new(uid(name)), node);
            store.inner.create(name, object).expect("stored");
        }
        let (actuator, _world) = ProcessActuator::new();
        let rt = Runtime::open(
            store.clone(),
            SystemClock::new(),
            actuator,
            Recovery::default(),
        )
        .expect("opens");
        (store, rt)
    }

    fn uid(name: &str) -> Name {
        Name::try_from(format!("uid-{name}").as_str()).expect("short")
    }

    fn delete(name: &str, preconditions: Preconditions) -> Request {
        Request::Delete {
            name: name.into(),
            options: DeleteOptions::with_grace(30).with_preconditions(preconditions),
        }
    }

    /// Queues `requests` as clients that sent them together, serves them
    /// as the agent does, and returns each answer with the number of
    /// commits done when its client first saw it, in request order.
    fn serve(
        store: &Watched,
        rt: &mut Runtime<Watched, SystemClock, ProcessActuator>,
        requests: Vec<Request>,
    ) -> Vec<(Reply, usize)> {
        let (tx, inputs) = mpsc::channel();
        let mut first = None;
        for (i, request) in requests.into_iter().enumerate() {
            let (reply, rx) = mpsc::sync_channel(1);
            store
                .clients
                .lock()
                .expect("not poisoned")
                .waiting
                .push((i, rx));
            match first {
                None => first = Some((request, reply)),
                Some(_) => tx.send(Input::Request(request, reply)).expect("queued"),
            }
        }
        drop(tx);
        let mut next = first.map(|(request, reply)| Input::Request(request, reply));
        while let Some(input @ Input::Request(..)) = next {
            let served = serve_batch(rt, input, &inputs, NODE, true);
            assert!(served.failed.is_none(), "no process event");
            next = served.rest;
        }
        assert!(next.is_none());
        store.look();
        let mut clients = store.clients.lock().expect("not poisoned");
        let mut seen = std::mem::take(&mut clients.seen);
        seen.sort_by_key(|&(i, _, _)| i);
        seen.into_iter().map(|(_, reply, at)| (reply, at)).collect()
    }

    fn kind(reply: &Reply) -> Option<ErrorKind> {
        match reply {
            Reply::Error(e) => Some(e.kind.clone()),
            _ => None,
        }
    }

    #[test]
    fn requests_sent_together_are_answered_after_one_commit_pair_and_a_refused_one_writes_nothing()
    {
        let dir = tempfile::tempdir().expect("dir");
        let names = ["o0", "o1", "o2", "o3", "o4"];
        let (store, mut rt) = setup(&dir, &names, NODE);
        let (_, o2_revision) = store.inner.get("o2").expect("read").expect("stored");
        let before = store.commits.load(Ordering::SeqCst);
        let wrong_uid = Preconditions {
            uid: Some(uid("someone-else")),
            resource_version: None,
        };
        let requests = vec![
            delete("o0", Preconditions::default()),
            delete("o1", Preconditions::default()),
            delete("o2", wrong_uid),
            delete("nobody", Preconditions::default()),
            delete("o3", Preconditions::default()),
            delete("o4", Preconditions::default()),
        ];

        let answers = serve(&store, &mut rt, requests);

        assert_eq!(answers.len(), 6, "every request is answered");
        // One batch: its write-ahead and the commit after its actions (the
        // removals of the objects, whose kill has nothing to stop).
        let after = store.commits.load(Ordering::SeqCst);
        assert_eq!(after, before + 2);
        for (i, (reply, at)) in answers.iter().enumerate() {
            assert_eq!(*at, after, "answer {i} only after both commits: {reply:?}");
        }
        assert_eq!(kind(&answers[2].0), Some(ErrorKind::Conflict));
        assert_eq!(kind(&answers[3].0), Some(ErrorKind::NotFound));
        for i in [0, 1, 4, 5] {
            assert!(
                matches!(answers[i].0, Reply::Deleted(_)),
                "{:?}",
                answers[i]
            );
        }
        for name in ["o0", "o1", "o3", "o4"] {
            assert_eq!(store.inner.get(name).expect("read"), None, "{name} removed");
        }
        let (o2, revision) = store.inner.get("o2").expect("read").expect("o2 stays");
        assert_eq!(revision, o2_revision, "the refused request wrote nothing");
        assert_eq!(o2.record.deletion_timestamp, None);
    }

    /// What an answer says, without its timestamps and revisions (each
    /// commit moves the store's revision).
    fn verdict(reply: &Reply) -> String {
        match reply {
            Reply::Error(e) => format!("{:?}", e.kind),
            Reply::Applied { .. } => "applied".into(),
            Reply::Deleted(d) => format!("deleted {:?}", d.outcome),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn one_dispatch_a_request_alone_is_answered_as_in_a_batch() {
        let requests = || {
            let wrong_uid = Preconditions {
                uid: Some(uid("someone-else")),
                resource_version: None,
            };
            let x = StoredObject::on_node(Record::new(uid("x")), "node-b");
            vec![
                delete("o0", Preconditions::default()),
                delete("o1", wrong_uid),
                delete("nobody", Preconditions::default()),
                Request::Apply {
                    name: "x".into(),
                    object: Box::new(x.clone()),
                },
                Request::Apply {
                    name: "x".into(),
                    object: Box::new(x),
                },
                Request::RemoveFinalizer {
                    name: "o1".into(),
                    finalizer: "example.com/none".into(),
                },
                Request::Apply {
                    name: "Not_A_Name".into(),
                    object: Box::new(StoredObject::on_node(Record::new(uid("y")), NODE)),
                },
            ]
        };
        let names = ["o0", "o1"];
        let batched = {
            let dir = tempfile::tempdir().expect("dir");
            let (store, mut rt) = setup(&dir, &names, NODE);
            serve(&store, &mut rt, requests())
                .iter()
                .map(|(reply, _)| verdict(reply))
                .collect::<Vec<_>>()
        };
        let alone = {
            let dir = tempfile::tempdir().expect("dir");
            let (_store, mut rt) = setup(&dir, &names, NODE);
            requests()
                .into_iter()
                .map(|request| verdict(&handle(&mut rt, request, NODE)))
                .collect::<Vec<_>>()
        };
        assert_eq!(alone, batched);
        assert_eq!(alone[1], "Conflict");
        assert_eq!(alone[2], "NotFound");
        assert_eq!(alone[4], "AlreadyExists");
        assert_eq!(alone[6], "Invalid");
    }

    #[test]
    fn a_request_sees_the_requests_before_it_and_its_preconditions_the_stored_revision() {
        let dir = tempfile::tempdir().expect("dir");
        // Bound to another node: a delete is decided and kept, pending.
        let (store, mut rt) = setup(&dir, &["p", "q"], "node-b");
        let (_, p_revision) = store.inner.get("p").expect("read").expect("stored");
        let before = store.commits.load(Ordering::SeqCst);
        let as_read = Preconditions {
            uid: None,
            resource_version: Some(p_revision.get()),
        };
        let x = StoredObject::on_node(Record::new(uid("x")), "node-b");
        let x_uid = Preconditions {
            uid: Some(uid("x")),
            resource_version: None,
        };
        let requests = vec![
            delete("p", as_read.clone()),
            delete("q", Preconditions::default()),
            // p changed since the client read it: refused, as it would be
            // one request at a time.
            delete("p", as_read),
            Request::Apply {
                name: "x".into(),
                object: Box::new(x),
            },
            // Sees the object the request before it created.
            delete("x", x_uid),
        ];

        let answers = serve(&store, &mut rt, requests);

        assert!(matches!(answers[0].0, Reply::Deleted(_)), "{answers:?}");
        assert!(matches!(answers[1].0, Reply::Deleted(_)), "{answers:?}");
        assert_eq!(
            kind(&answers[2].0),
            Some(ErrorKind::Conflict),
            "{answers:?}"
        );
        assert!(matches!(answers[3].0, Reply::Applied { .. }), "{answers:?}");
        assert!(matches!(answers[4].0, Reply::Deleted(_)), "{answers:?}");
        // Three batches: p and q (the write-ahead, and the commit after
        // their actions); p again, refused, and the create of x (which owes
        // no action: one commit); x's delete (two).
        assert_eq!(store.commits.load(Ordering::SeqCst), before + 5);
        for name in ["p", "q", "x"] {
            let (object, _) = store.inner.get(name).expect("read").expect("stored");
            assert!(object.record.deletion_timestamp.is_some(), "{name}");
        }
    }

    #[test]
    fn an_exit_and_the_requests_waiting_with_it_are_committed_together() {
        use crate::process::WorldEvent;
        use crate::store::StoredContainer;

        let dir = tempfile::tempdir().expect("dir");
        let (store, mut rt) = setup(&dir, &["b", "c"], NODE);
        // `a` is being deleted and waits for its container to stop.
        let mut a = StoredObject::on_node(Record::new(uid("a")), NODE);
        a.containers
            .push(StoredContainer::new("main", vec!["sleep", "1000"]));
        rt.create("a", a).expect("created");
        let _ = rt
            .handle(
                "a",
                grace_core::Input::Delete(DeleteOptions::with_grace(30)),
            )
            .expect("deleted");
        let _ = rt
            .handle("a", grace_core::Input::AgentSync)
            .expect("its stop signal sent");
        assert!(rt.lifecycle("a").is_some(), "waits for its container");
        let before = store.commits.load(Ordering::SeqCst);
        // Its exit comes first; two deletes wait behind it.
        let (tx, inputs) = mpsc::channel();
        let mut replies = Vec::new();
        for name in ["b", "c"] {
            let (reply, rx) = mpsc::sync_channel(1);
            tx.send(Input::Request(
                delete(name, Preconditions::default()),
                reply,
            ))
            .expect("queued");
            replies.push(rx);
        }
        drop(tx);
        let exit = WorldEvent::exited("a", 0, Some(143));

        let served = serve_batch(&mut rt, Input::World(exit), &inputs, NODE, true);
        assert!(
            served.failed.is_none() && served.unwritten.is_empty(),
            "taken"
        );
        let rest = served.rest;

        assert!(rest.is_none(), "every input in the batch");
        // The write-ahead and the commit after the actions, for all three.
        assert_eq!(store.commits.load(Ordering::SeqCst), before + 2);
        for rx in replies {
            let reply = rx.try_recv().expect("answered");
            assert!(matches!(reply, Reply::Deleted(_)), "{reply:?}");
        }
        for name in ["a", "b", "c"] {
            assert_eq!(store.inner.get(name).expect("read"), None, "{name} removed");
        }
    }
}
