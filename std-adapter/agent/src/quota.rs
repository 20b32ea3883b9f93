//! How many connections and watches the agent serves at once, and how
//! many of them one user or the allowed group may hold, so that nobody
//! else can take every slot from the agent's own user and root.
//!
//! | who | connections | of which watches |
//! |---|---|---|
//! | everyone together | [`MAX_CONNECTIONS`] (64) | [`MAX_WATCHES`] (32) |
//! | the members of the `--allow-group` group together | [`GROUP_CONNECTIONS`] (24) | [`GROUP_WATCHES`] (12) |
//! | each member (by uid) | [`USER_CONNECTIONS`] (8) | [`USER_WATCHES`] (4) |
//!
//! The Kubernetes API (`--k8s-api`) counts its connections apart:
//! [`API_CONNECTIONS`] (256) in all, of which the users other than the
//! agent's own hold at most [`API_OTHERS_CONNECTIONS`] (128) together and
//! [`USER_CONNECTIONS`] (8) each.
//!
//! The agent's own user and root count in the totals only. Whatever the
//! group holds and however many watches are open, at least
//! `64 − 24 − 32 = 8` connections stay for the requests of the agent's own
//! user and root ([`RESERVED`]); only their own connections can take
//! those.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The most connections served at once (a watch holds one).
pub const MAX_CONNECTIONS: usize = 64;

/// The most watches served at once, everyone's together: the other half
/// of the connections stays for requests.
pub const MAX_WATCHES: usize = 32;

/// The most connections the members of the allowed group hold together.
pub const GROUP_CONNECTIONS: usize = 24;

/// The most watches the members of the allowed group hold together.
pub const GROUP_WATCHES: usize = 12;

/// The most connections one member of the allowed group holds.
pub const USER_CONNECTIONS: usize = 8;

/// The most watches one member of the allowed group holds.
pub const USER_WATCHES: usize = 4;

/// The most connections the Kubernetes API (`--k8s-api`) serves at once,
/// counted apart from the socket's [`MAX_CONNECTIONS`]: its connections
/// are tasks on the API's one thread (a watch adds a thread while it
/// lasts), so that a hundred watches of kubectl, controllers and
/// dashboards fit beside the socket's clients.
pub const API_CONNECTIONS: usize = 256;

/// Of [`API_CONNECTIONS`], the most that the API's users other than the
/// agent's own hold together (each at most [`USER_CONNECTIONS`]): the
/// rest stays for the agent's own user.
pub const API_OTHERS_CONNECTIONS: usize = 128;

/// The connections that always stay for the requests of the agent's own
/// user and root, whatever the group and the watches hold.
pub const RESERVED: usize = MAX_CONNECTIONS - GROUP_CONNECTIONS - MAX_WATCHES;

const _: () = assert!(RESERVED >= 8 && USER_CONNECTIONS <= GROUP_CONNECTIONS);
const _: () = assert!(USER_CONNECTIONS <= API_OTHERS_CONNECTIONS);
const _: () = assert!(API_OTHERS_CONNECTIONS < API_CONNECTIONS);
const _: () = assert!(USER_WATCHES <= GROUP_WATCHES && GROUP_WATCHES <= MAX_WATCHES);

/// Who holds a connection, for the quotas.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Holder {
    /// The agent's own user or root: the totals only.
    Trusted,
    /// A member of the allowed group, by uid.
    Member(u32),
}

#[derive(Default, Debug)]
struct Counts {
    connections: usize,
    watches: usize,
    group_connections: usize,
    group_watches: usize,
    /// Per member uid: (connections, watches); no entry at zero.
    members: HashMap<u32, (usize, usize)>,
}

/// The agent's counts of connections and watches.
#[derive(Default, Debug)]
pub(super) struct Quotas {
    counts: Mutex<Counts>,
}

impl Quotas {
    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A connection for `holder`, given back when the [`Connection`] is
    /// dropped; or why not (the line the client is answered).
    pub(super) fn connect(
        quotas: &Arc<Quotas>,
        holder: Holder,
        group: &str,
    ) -> Result<Connection, String> {
        let mut c = quotas.counts();
        if c.connections >= MAX_CONNECTIONS {
            return Err(format!(
                "the agent serves {MAX_CONNECTIONS} connections already; try again"
            ));
        }
        if let Holder::Member(uid) = holder {
            if c.group_connections >= GROUP_CONNECTIONS {
                return Err(format!(
                    "the members of group {group} hold {GROUP_CONNECTIONS} connections to the agent \
                     already (their share; the rest is kept for its own user and root); try again"
                ));
            }
            let mine = c.members.get(&uid).map_or(0, |m| m.0);
            if mine >= USER_CONNECTIONS {
                return Err(format!(
                    "uid {uid} holds {USER_CONNECTIONS} connections to the agent already \
                     (each user's share); try again"
                ));
            }
            c.group_connections = c.group_connections.saturating_add(1);
            c.members.entry(uid).or_default().0 = mine.saturating_add(1);
        }
        c.connections = c.connections.saturating_add(1);
        Ok(Connection {
            quotas: Arc::clone(quotas),
            holder,
            watching: false,
        })
    }
}

/// One connection held, given back (with its watch) when dropped.
#[derive(Debug)]
pub(super) struct Connection {
    quotas: Arc<Quotas>,
    holder: Holder,
    watching: bool,
}

impl Connection {
    /// Makes this connection a watch, or says why not (the line the client
    /// is answered). A connection watches at most once.
    pub(super) fn watch(&mut self, group: &str) -> Result<(), String> {
        if self.watching {
            return Ok(());
        }
        let mut c = self.quotas.counts();
        if c.watches >= MAX_WATCHES {
            return Err(format!(
                "the agent serves {MAX_WATCHES} watches already; try again"
            ));
        }
        if let Holder::Member(uid) = self.holder {
            if c.group_watches >= GROUP_WATCHES {
                return Err(format!(
                    "the members of group {group} hold {GROUP_WATCHES} watches already \
                     (their share); try again"
                ));
            }
            let mine = c.members.get(&uid).map_or(0, |m| m.1);
            if mine >= USER_WATCHES {
                return Err(format!(
                    "uid {uid} holds {USER_WATCHES} watches already (each user's share); try again"
                ));
            }
            c.group_watches = c.group_watches.saturating_add(1);
            c.members.entry(uid).or_default().1 = mine.saturating_add(1);
        }
        c.watches = c.watches.saturating_add(1);
        self.watching = true;
        Ok(())
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let mut c = self.quotas.counts();
        c.connections = c.connections.saturating_sub(1);
        if self.watching {
            c.watches = c.watches.saturating_sub(1);
        }
        if let Holder::Member(uid) = self.holder {
            c.group_connections = c.group_connections.saturating_sub(1);
            if self.watching {
                c.group_watches = c.group_watches.saturating_sub(1);
            }
            let watching = self.watching;
            let empty = c.members.get_mut(&uid).is_none_or(|m| {
                m.0 = m.0.saturating_sub(1);
                if watching {
                    m.1 = m.1.saturating_sub(1);
                }
                *m == (0, 0)
            });
            if empty {
                c.members.remove(&uid);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(quotas: &Arc<Quotas>, holder: Holder, n: usize) -> Vec<Connection> {
        (0..n)
            .map(|_| Quotas::connect(quotas, holder, "ops").expect("room"))
            .collect()
    }

    #[test]
    fn a_member_takes_its_share_and_the_group_its_own_the_rest_stays_for_the_owner() {
        let q = Arc::new(Quotas::default());
        let alice = fill(&q, Holder::Member(1001), USER_CONNECTIONS);
        let e = Quotas::connect(&q, Holder::Member(1001), "ops").expect_err("over her share");
        assert!(e.contains("uid 1001 holds 8 connections"), "{e}");
        let others: Vec<_> = (1002..1004)
            .flat_map(|uid| fill(&q, Holder::Member(uid), USER_CONNECTIONS))
            .collect();
        let e = Quotas::connect(&q, Holder::Member(1005), "ops").expect_err("over the group's");
        assert!(e.contains("group ops"), "{e}");
        let owner = fill(&q, Holder::Trusted, MAX_CONNECTIONS - GROUP_CONNECTIONS);
        let e = Quotas::connect(&q, Holder::Trusted, "ops").expect_err("full");
        assert!(e.contains("64 connections already"), "{e}");
        drop((alice, others, owner));
        let c = q.counts();
        assert_eq!((c.connections, c.group_connections), (0, 0));
        assert!(c.members.is_empty(), "given back");
    }

    #[test]
    fn watches_have_quotas_too_and_leave_the_reserved_connections() {
        let q = Arc::new(Quotas::default());
        let mut member = fill(&q, Holder::Member(7), USER_CONNECTIONS);
        let refused = member
            .iter_mut()
            .map(|c| c.watch("ops"))
            .filter(Result::is_err)
            .count();
        assert_eq!(refused, USER_CONNECTIONS - USER_WATCHES);
        // The group's share of connections, then the owner's watches up
        // to the total: the reserved connections are still free.
        let rest: Vec<_> = (8..10)
            .flat_map(|uid| fill(&q, Holder::Member(uid), USER_CONNECTIONS))
            .collect();
        let mut owner = fill(&q, Holder::Trusted, MAX_WATCHES);
        let watching = owner
            .iter_mut()
            .map(|c| c.watch("ops"))
            .filter(Result::is_ok)
            .count();
        assert_eq!(watching, MAX_WATCHES - USER_WATCHES);
        let requests = fill(&q, Holder::Trusted, RESERVED);
        assert_eq!(requests.len(), 8);
        drop((member, rest, owner, requests));
        let c = q.counts();
        assert_eq!((c.connections, c.watches, c.group_watches), (0, 0, 0));
    }
}
