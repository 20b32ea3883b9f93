//! Requests decided straight against a shared store: what a Kubernetes
//! API server does, for any process that can reach the store.
//!
//! With one machine the node agent (`grace agent`) is the API server. With
//! several agents sharing etcd, each agent runs only the objects bound to
//! its node, and a request is decided here, by whoever makes it (the CLI):
//! the object is read, grace-core decides on it as the API server would
//! (with the containers its agent reported stopped, as a pod's status
//! tells the API server),
//! and the new record is written with compare-and-swap — only the record
//! (`StoredObject::record`); the owning agent's kill state is left as it is.
//! The agent follows the store's watch and takes the change
//! ([`Runtime::observe`](crate::runtime::Runtime::observe)), as the
//! kubelet follows the pods it runs. A write that loses a race with
//! another writer is decided again on what won.
//!
//! Nothing here needs the owning agent to be up: a deletion of an object
//! on a lost node is accepted and waits for its agent (R80); a force
//! delete (D4) and [fencing](fence_node) (D7, R82) remove records
//! without it.

use grace_core::Input;
use grace_core::{
    DeleteError, DeleteOptions, FinalizerChange, Now, UpdateError, UpdateOutcome, decide_delete,
};

use crate::runtime::{
    Collected, DeleteAnswer, ObjectLifecycle, RuntimeError, fresh, stopped_containers,
};
use crate::store::{FINALIZERS, Revision, Store, StoreError, StorePreconditions, StoredObject};

/// A decision that keeps losing compare-and-swap races gives up after this
/// many attempts (each attempt, one competing writer wins).
const ATTEMPTS: usize = 64;

/// The longest DNS-1123 label: 63 bytes. A container's name and a node's
/// name are such labels, and a generated name is at most this long
/// ([`check_name`]).
pub const NAME_MAX: usize = 63;

/// The longest object name accepted: a DNS-1123 subdomain's 253 bytes
/// ([`check_object_name`]), as the Kubernetes API server allows a pod's.
pub const OBJECT_NAME_MAX: usize = 253;

/// Why a name is refused ([`check_name`]); it prints kubectl's words.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameError {
    /// Empty, or longer than `max` bytes ([`NAME_MAX`] for an object's
    /// name).
    Length {
        /// Its length in bytes.
        len: usize,
        /// The most it may have.
        max: usize,
    },
    /// Not a DNS-1123 label: a character other than a lower-case letter,
    /// a digit or `-`, or `-` at either end.
    NotDnsLabel {
        /// The name.
        name: String,
    },
    /// Not a DNS-1123 subdomain: a character other than a lower-case
    /// letter, a digit, `-` or `.`, or a dot-separated part that does not
    /// start and end with a letter or digit.
    NotDnsSubdomain {
        /// The name.
        name: String,
    },
}

impl std::fmt::Display for NameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NameError::Length { len, max } => {
                write!(f, "must be 1 to {max} characters, got {len}")
            }
            NameError::NotDnsLabel { name } => write!(
                f,
                "`{name}` is not a DNS-1123 label (lower-case letters, digits and '-', starting and ending with a letter or digit)"
            ),
            NameError::NotDnsSubdomain { name } => write!(
                f,
                "`{name}` is not a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', each '.'-separated part starting and ending with a letter or digit)"
            ),
        }
    }
}

impl std::error::Error for NameError {}

/// Checks that `name` is a DNS-1123 label (lower-case letters, digits and
/// `-`, starting and ending with a letter or digit, 1 to [`NAME_MAX`]
/// bytes).
pub fn check_name(name: &str) -> Result<(), NameError> {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if name.is_empty() || name.len() > NAME_MAX {
        return Err(NameError::Length {
            len: name.len(),
            max: NAME_MAX,
        });
    }
    if !name.chars().all(ok_char) || !edge(name.chars().next()) || !edge(name.chars().last()) {
        return Err(NameError::NotDnsLabel {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// Checks that `name` is a DNS-1123 subdomain, as Kubernetes requires of
/// a pod's name: 1 to [`OBJECT_NAME_MAX`] bytes, lower-case letters,
/// digits, `-` and `.`, each `.`-separated part starting and ending with a
/// letter or digit.
pub fn check_object_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() || name.len() > OBJECT_NAME_MAX {
        return Err(NameError::Length {
            len: name.len(),
            max: OBJECT_NAME_MAX,
        });
    }
    let part_ok = |part: &str| {
        let edge = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        edge(part.bytes().next())
            && edge(part.bytes().last())
            && part
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    if !name.split('.').all(part_ok) {
        return Err(NameError::NotDnsSubdomain {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// The characters of a generated name's suffix: the Kubernetes API
/// server's (`names.SimpleNameGenerator`), no vowels, no look-alikes.
const GENERATED_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// How many characters a generated name adds to its prefix.
const GENERATED_LENGTH: usize = 5;

/// A name for a manifest's `metadata.generateName`, as the Kubernetes API
/// server makes one: the prefix, cut so that the whole is at most
/// [`NAME_MAX`] bytes, then five random characters from
/// `bcdfghjklmnpqrstvwxz2456789`. `random` supplies the randomness (one
/// call per character); the caller retries on a clash with a stored name.
pub fn generate_name(prefix: &str, mut random: impl FnMut() -> u64) -> String {
    let mut cut = NAME_MAX.saturating_sub(GENERATED_LENGTH).min(prefix.len());
    while !prefix.is_char_boundary(cut) {
        cut = cut.saturating_sub(1);
    }
    let mut name = prefix.get(..cut).unwrap_or_default().to_owned();
    for _ in 0..GENERATED_LENGTH {
        let len = GENERATED_ALPHABET.len() as u64;
        let i = usize::try_from(random().checked_rem(len).unwrap_or(0)).unwrap_or(0);
        name.push(char::from(
            GENERATED_ALPHABET.get(i).copied().unwrap_or(b'x'),
        ));
    }
    name
}

/// Why a label is refused ([`check_label`]); it prints kubectl's words.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LabelError {
    /// The key's prefix (before `/`) is not a DNS subdomain.
    KeyPrefix {
        /// The key.
        key: String,
    },
    /// The key's name (after any prefix) is empty, too long, or holds a
    /// character a label may not.
    KeyName {
        /// The key.
        key: String,
    },
    /// The value is neither empty nor a valid label name.
    Value {
        /// The value.
        value: String,
    },
}

impl std::fmt::Display for LabelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LabelError::KeyPrefix { key } => write!(
                f,
                "Invalid value: \"{key}\": a label key's prefix must be a DNS subdomain"
            ),
            LabelError::KeyName { key } => write!(
                f,
                "Invalid value: \"{key}\": a label key's name must be at most 63 characters: letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
            ),
            LabelError::Value { value } => write!(
                f,
                "Invalid value: \"{value}\": a label value must be empty or at most 63 characters: letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
            ),
        }
    }
}

impl std::error::Error for LabelError {}

/// Checks a label (`key`, `value`) as the Kubernetes API server does: the
/// key an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters; the value empty or such a name.
pub fn check_label(key: &str, value: &str) -> Result<(), LabelError> {
    let name_ok = |s: &str| {
        !s.is_empty()
            && s.len() <= 63
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && s.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
    };
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && (prefix.is_empty()
            || prefix.len() > 253
            || !prefix.split('.').all(|part| check_name(part).is_ok()))
    {
        return Err(LabelError::KeyPrefix {
            key: key.to_owned(),
        });
    }
    if !name_ok(name) {
        return Err(LabelError::KeyName {
            key: key.to_owned(),
        });
    }
    if !value.is_empty() && !name_ok(value) {
        return Err(LabelError::Value {
            value: value.to_owned(),
        });
    }
    Ok(())
}

/// Stores a new object under a free `name`, a store key
/// ([`ObjectKey`](crate::store::ObjectKey)) (its agent, if it has one,
/// takes it from the watch and starts it).
pub fn create<S: Store + ?Sized>(
    store: &S,
    name: &str,
    object: StoredObject,
) -> Result<Revision, RuntimeError> {
    crate::store::ObjectKey::parse(name).map_err(|e| {
        let field = e.field();
        let (crate::store::KeyError::Namespace(reason) | crate::store::KeyError::Name(reason)) = e;
        RuntimeError::InvalidName { field, reason }
    })?;
    let mut object = object;
    object.agent = None;
    store.create(name, object).map_err(|e| match e {
        StoreError::AlreadyExists { .. } => RuntimeError::AlreadyExists(name.to_owned()),
        other => other.into(),
    })
}

/// A delete request (R1–R44, D4), decided on the stored record.
pub fn delete<S: Store + ?Sized>(
    store: &S,
    now: Now,
    name: &str,
    options: &DeleteOptions,
) -> Result<DeleteAnswer, RuntimeError> {
    decide(store, name, |_, lifecycle| {
        let response = lifecycle
            .handle(now, Input::Delete(options.clone()))
            .delete()
            .unwrap_or(Err(DeleteError::NotFound))
            .map_err(RuntimeError::Delete)?;
        let record = if response.dry_run {
            // Nothing changes: the same decision, not applied (R42).
            decide_delete(lifecycle.record(), &lifecycle.strategy(), options, now.wall)
                .map_err(RuntimeError::Delete)?
                .record
        } else {
            lifecycle.record().clone()
        };
        let write = if response.dry_run {
            Decided::Nothing
        } else if lifecycle.is_stored() {
            Decided::Update(Box::new(record.clone()))
        } else {
            Decided::Remove
        };
        Ok((write, DeleteAnswer { response, record }))
    })
    .map_err(|e| match e {
        RuntimeError::NotFound(_) => RuntimeError::Delete(DeleteError::NotFound),
        other => other,
    })
}

/// An update of the finalizer list (R45, R46), decided on the stored
/// record; the last finalizer of an object with no grace left removes it.
pub fn update_finalizers<S: Store + ?Sized>(
    store: &S,
    now: Now,
    name: &str,
    change: &FinalizerChange,
) -> Result<UpdateOutcome, RuntimeError> {
    decide(store, name, |object, lifecycle| {
        let outcome = lifecycle
            .handle(now, Input::FinalizerUpdate(change.clone()))
            .update()
            .unwrap_or(Err(UpdateError::NotFound))
            .map_err(RuntimeError::Update)?;
        let write = match outcome {
            UpdateOutcome::Deleted { .. } => Decided::Remove,
            // Updated (or an outcome added later): write what changed.
            _ if lifecycle.record() != &object.record => {
                Decided::Update(Box::new(lifecycle.record().clone()))
            }
            _ => Decided::Nothing,
        };
        Ok((write, outcome))
    })
    .map_err(|e| match e {
        RuntimeError::NotFound(_) => RuntimeError::Update(UpdateError::NotFound),
        other => other,
    })
}

/// The garbage collector's step ([`crate::gc`]) on a shared store after a
/// delete of `name`: with no owner reference stored, it removes the
/// `orphan` and `foregroundDeletion` finalizers of `name` if it is marked
/// for deletion, each with [`update_finalizers`] (R45: the last one may
/// remove the object); otherwise it is [`collect_all_garbage`]. Returns
/// the finalizers removed from `name`.
pub fn collect_garbage<S: Store + ?Sized>(
    store: &S,
    now: Now,
    name: &str,
) -> Result<Vec<grace_core::Name>, RuntimeError> {
    if has_owner_references(store)? {
        let collected = collect_all_garbage(store, now)?;
        return Ok(collected
            .finalizers_removed
            .into_iter()
            .filter(|(n, _)| n == name)
            .map(|(_, f)| f)
            .collect());
    }
    let Some((object, _)) = store.get(name)? else {
        return Ok(Vec::new());
    };
    let mut removed = Vec::new();
    for finalizer in crate::gc::finalizers_to_remove(&object.record) {
        match update_finalizers(
            store,
            now,
            name,
            &FinalizerChange::Remove(finalizer.clone()),
        ) {
            Ok(_) => removed.push(finalizer),
            Err(RuntimeError::Update(UpdateError::NotFound)) => break,
            Err(e) => return Err(e),
        }
    }
    Ok(removed)
}

/// Whether an object of `store` holds an owner reference.
fn has_owner_references<S: Store + ?Sized>(store: &S) -> Result<bool, RuntimeError> {
    Ok(store
        .list()?
        .objects
        .iter()
        .any(|(_, o, _)| !o.owners.is_empty()))
}

/// The garbage collector's steps over every object of a shared store
/// ([`crate::gc::plan`]), as [`Runtime::collect_all_garbage`] takes them
/// in an agent: dependents whose owners are gone deleted ([`delete`]),
/// references to orphaning owners dropped (a compare-and-swap on the
/// revision read), GC finalizers removed once the owner's dependents allow
/// it ([`update_finalizers`]). Several may run it at once: each step is
/// conditional, and one that lost a race is planned again the next time.
///
/// [`Runtime::collect_all_garbage`]: crate::runtime::Runtime::collect_all_garbage
pub fn collect_all_garbage<S: Store + ?Sized>(
    store: &S,
    now: Now,
) -> Result<Collected, RuntimeError> {
    let mut collected = Collected::default();
    // A step may make another possible: planned again until nothing is new.
    for _ in 0..8 {
        let listing = store.list()?;
        let view: Vec<crate::gc::GcObject> = listing
            .objects
            .iter()
            .map(|(name, o, _)| crate::gc::GcObject::of(name, &o.record, &o.owners))
            .collect();
        let mut progressed = false;
        for step in crate::gc::plan(&view) {
            progressed |= gc_step(store, now, step, &mut collected)?;
        }
        if !progressed {
            break;
        }
    }
    Ok(collected)
}

/// Takes one step of the garbage collector on a shared store; whether it
/// changed anything. An object gone, replaced or changed meanwhile is
/// left for the next collection.
fn gc_step<S: Store + ?Sized>(
    store: &S,
    now: Now,
    step: crate::gc::GcStep,
    collected: &mut Collected,
) -> Result<bool, RuntimeError> {
    use crate::gc::GcStep;
    let result = match step {
        GcStep::DropOwners { name, uid, owners } => {
            let Some((mut object, revision)) = store.get(&name)? else {
                return Ok(false);
            };
            let before = object.owners.len();
            object.owners.retain(|r| !owners.contains(&r.uid));
            if object.uid() != uid || object.owners.len() == before {
                return Ok(false);
            }
            store
                .update(&name, object, revision)
                .map(|_| ())
                .map_err(RuntimeError::from)
        }
        GcStep::Delete {
            name,
            uid,
            foreground,
        } => {
            let options = crate::gc::dependent_delete_options(&uid, foreground);
            let deleted = delete(store, now, &name, &options);
            if deleted.is_ok() {
                collected.deleted.push(name);
            }
            deleted.map(|_| ())
        }
        GcStep::RemoveFinalizer { name, finalizer } => {
            let Ok(finalizer) = grace_core::Name::try_from(finalizer) else {
                return Ok(false);
            };
            let removed = update_finalizers(
                store,
                now,
                &name,
                &FinalizerChange::Remove(finalizer.clone()),
            );
            if removed.is_ok() {
                collected.finalizers_removed.push((name, finalizer));
            }
            removed.map(|_| ())
        }
    };
    match result {
        Ok(()) => Ok(true),
        Err(
            RuntimeError::NotFound(_)
            | RuntimeError::Update(UpdateError::NotFound)
            | RuntimeError::Delete(DeleteError::NotFound | DeleteError::Conflict(_))
            | RuntimeError::Store(StoreError::Conflict { .. } | StoreError::NotFound { .. }),
        ) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Declares `node` gone for good (D7): like PodGC on a deleted node (R82),
/// every object bound to it is marked Failed and deleted with grace 0 —
/// removed, or kept with a deletion timestamp while finalizers hold it.
/// Nothing is signalled: the node's workloads count as stopped. Returns
/// the names handled, in name order.
///
/// Call it only with proof that the node is gone, and only after the
/// node's fencing epoch was moved (`EtcdStore::bump_fencing_epoch`), so
/// that its agent, should it come back, can no longer write.
pub fn fence_node<S: Store + ?Sized>(
    store: &S,
    now: Now,
    node: &str,
) -> Result<Vec<String>, RuntimeError> {
    let listing = store.list()?;
    let mut fenced = Vec::new();
    for (name, object, _) in listing.objects {
        if object.node.as_deref() != Some(node) {
            continue;
        }
        let result = decide(store, &name, |object, lifecycle| {
            if object.node.as_deref() != Some(node) {
                return Ok((Decided::Nothing, ()));
            }
            let _ = lifecycle.handle(now, Input::NodeFenced).handled();
            let write = if lifecycle.is_stored() {
                Decided::Update(Box::new(lifecycle.record().clone()))
            } else {
                Decided::Remove
            };
            Ok((write, ()))
        });
        match result {
            Ok(()) => fenced.push(name),
            // Removed meanwhile: nothing left to fence.
            Err(RuntimeError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(fenced)
}

/// What a decision writes.
enum Decided {
    /// Nothing (a dry run, no change).
    Nothing,
    /// The object with this record (its other parts as stored).
    Update(Box<grace_core::Record<FINALIZERS>>),
    /// Remove the object (if it is still the one decided on).
    Remove,
}

/// Reads `name`, decides with `decision` on what is stored (the object,
/// and a lifecycle for it as it stands, its containers as its agent
/// reported them) and writes the outcome with compare-and-swap; decides
/// again if another writer won.
fn decide<S: Store + ?Sized, T>(
    store: &S,
    name: &str,
    mut decision: impl FnMut(&StoredObject, &mut ObjectLifecycle) -> Result<(Decided, T), RuntimeError>,
) -> Result<T, RuntimeError> {
    for _ in 0..ATTEMPTS {
        let Some((object, revision)) = store.get(name)? else {
            return Err(RuntimeError::NotFound(name.to_owned()));
        };
        let mut lifecycle = fresh(&object, &stopped_containers(&object))?;
        lifecycle.set_resource_version(revision.get());
        let (write, answer) = decision(&object, &mut lifecycle)?;
        let written = match write {
            Decided::Nothing => return Ok(answer),
            Decided::Update(record) => {
                let mut object = object;
                object.record = *record;
                store.update(name, object, revision)
            }
            Decided::Remove => store.delete(
                name,
                StorePreconditions {
                    uid: Some(object.uid().to_owned()),
                    revision: Some(revision),
                },
            ),
        };
        match written {
            Ok(_) => return Ok(answer),
            Err(
                StoreError::Conflict { .. }
                | StoreError::NotFound { .. }
                | StoreError::UidMismatch { .. },
            ) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Err(RuntimeError::Store(StoreError::Unavailable(
        crate::store::BackendError::from(format!(
            "{name}: other writers won {ATTEMPTS} times in a row"
        )),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refused name or label says why as a typed value, and prints
    /// kubectl's words.
    #[test]
    fn names_and_labels_are_refused_with_a_typed_reason() {
        assert_eq!(check_name("web-0"), Ok(()));
        assert_eq!(check_name(""), Err(NameError::Length { len: 0, max: 63 }));
        let long = "a".repeat(64);
        assert_eq!(
            check_name(&long),
            Err(NameError::Length { len: 64, max: 63 })
        );
        let refused = check_name("Web_0").expect_err("not a DNS-1123 label");
        assert_eq!(
            refused,
            NameError::NotDnsLabel {
                name: "Web_0".into()
            }
        );
        assert!(refused.to_string().contains("is not a DNS-1123 label"));

        assert_eq!(check_label("example.com/tier", "web"), Ok(()));
        assert_eq!(
            check_label("Bad_Prefix/tier", "web"),
            Err(LabelError::KeyPrefix {
                key: "Bad_Prefix/tier".into()
            })
        );
        assert_eq!(
            check_label("-tier", "web"),
            Err(LabelError::KeyName {
                key: "-tier".into()
            })
        );
        assert_eq!(
            check_label("tier", "web!"),
            Err(LabelError::Value {
                value: "web!".into()
            })
        );
    }

    /// Object names are DNS-1123 subdomains of up to 253 bytes, with dots,
    /// as Kubernetes allows a pod's; the errors name why.
    #[test]
    fn object_names_are_dns_subdomains_up_to_253() {
        let dotted = format!("{}.{}.x", "a".repeat(125), "b".repeat(125));
        assert_eq!(dotted.len(), 253);
        assert_eq!(check_object_name(&dotted), Ok(()));
        assert_eq!(check_object_name("web.v2-0"), Ok(()));
        assert_eq!(
            check_object_name(&format!("{dotted}z")),
            Err(NameError::Length { len: 254, max: 253 })
        );
        assert_eq!(
            check_object_name(""),
            Err(NameError::Length { len: 0, max: 253 })
        );
        for refused in [
            "web..0", ".web", "web.", "web.-0", "Web", "web_0", "ns/web", "web-",
        ] {
            assert_eq!(
                check_object_name(refused),
                Err(NameError::NotDnsSubdomain {
                    name: refused.into()
                }),
                "{refused}"
            );
        }
        assert!(
            check_object_name("a..b")
                .expect_err("empty part")
                .to_string()
                .contains("is not a DNS-1123 subdomain")
        );
    }

    /// generateName: the prefix cut to leave room for five characters of
    /// the API server's alphabet, at most 63 in all.
    #[test]
    fn generated_names_are_the_prefix_and_five_characters() {
        let mut n = 0u64;
        let name = generate_name("web-", || {
            n += 1;
            n
        });
        assert_eq!(name, "web-cdfgh");
        assert_eq!(check_object_name(&name), Ok(()));
        let long = generate_name(&"p".repeat(100), || 0);
        assert_eq!(long, format!("{}bbbbb", "p".repeat(58)));
        assert_eq!(long.len(), NAME_MAX);
        let name = generate_name("web-", || u64::MAX);
        assert!(
            name.bytes()
                .skip(4)
                .all(|b| GENERATED_ALPHABET.contains(&b))
        );
    }
}
