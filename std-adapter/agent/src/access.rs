//! Who may talk to the agent: the peer credentials of each connection
//! (`SO_PEERCRED`) against the agent's own user, root, and the group
//! `--allow-group` names.
//!
//! The filesystem is the first gate: the data directory is `0700` (`0710`
//! with its group set to the allowed group) and the socket `0600` (`0660`),
//! so nobody else can even connect. This check is the second: should the
//! modes be loosened by mistake, a peer the agent does not serve is still
//! refused, before anything it sent is read.

use std::io;
use std::os::unix::net::UnixStream;
use std::str::FromStr;

use crate::api::Request;

/// What an allowed peer may do.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// `get` and `watch` (and the agent's status, for `describe`): read,
    /// change nothing.
    ReadOnly,
    /// Everything the agent's own user may do.
    ReadWrite,
}

impl Access {
    /// Whether this access allows `request`.
    pub fn allows(self, request: &Request) -> bool {
        match self {
            Access::ReadWrite => true,
            Access::ReadOnly => {
                matches!(
                    request,
                    Request::Get { .. } | Request::Watch | Request::Status
                )
            }
        }
    }
}

/// `--allow-group GROUP[:ro|:rw]`: a group whose members may talk to the
/// agent, read-only (the default) or read-write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllowGroup {
    /// The group as given (a name or a number).
    pub name: String,
    /// Its id.
    pub gid: u32,
    /// What its members may do.
    pub access: Access,
}

/// Why `--allow-group`'s value was refused.
#[derive(Debug)]
#[non_exhaustive]
pub enum AllowGroupError {
    /// What follows the last `:` is neither `ro` nor `rw`.
    Access(String),
    /// No group is named.
    Empty,
    /// `/etc/group` cannot be read.
    GroupFile(io::Error),
    /// No such group in `/etc/group`.
    NoGroup(String),
}

impl std::fmt::Display for AllowGroupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AllowGroupError::Access(other) => write!(
                f,
                "`{other}` is not an access: GROUP:ro (get and watch) or GROUP:rw (everything)"
            ),
            AllowGroupError::Empty => f.write_str("the group is empty: GROUP[:ro|:rw]"),
            AllowGroupError::GroupFile(e) => write!(f, "/etc/group: {e}"),
            AllowGroupError::NoGroup(name) => write!(
                f,
                "no group `{name}` in /etc/group (give its number for other sources)"
            ),
        }
    }
}

/// The cause is in the message: none is returned as a source.
impl std::error::Error for AllowGroupError {}

impl FromStr for AllowGroup {
    type Err = AllowGroupError;

    /// `GROUP`, `GROUP:ro` or `GROUP:rw`; a name is looked up in
    /// `/etc/group`, a number is taken as the gid.
    fn from_str(arg: &str) -> Result<Self, AllowGroupError> {
        let (name, access) = match arg.rsplit_once(':') {
            Some((name, "ro")) => (name, Access::ReadOnly),
            Some((name, "rw")) => (name, Access::ReadWrite),
            Some((_, other)) => return Err(AllowGroupError::Access(other.to_owned())),
            None => (arg, Access::ReadOnly),
        };
        if name.is_empty() {
            return Err(AllowGroupError::Empty);
        }
        let gid = match name.parse::<u32>() {
            Ok(gid) => gid,
            Err(_) => {
                let groups =
                    std::fs::read_to_string("/etc/group").map_err(AllowGroupError::GroupFile)?;
                group_id(&groups, name).ok_or_else(|| AllowGroupError::NoGroup(name.to_owned()))?
            }
        };
        Ok(AllowGroup {
            name: name.to_owned(),
            gid,
            access,
        })
    }
}

/// The gid of `name` in the text of `/etc/group`.
fn group_id(groups: &str, name: &str) -> Option<u32> {
    groups.lines().find_map(|line| {
        let mut fields = line.split(':');
        (fields.next()? == name)
            .then(|| fields.nth(1)?.parse().ok())
            .flatten()
    })
}

/// The credentials of a connected peer.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// Its process.
    pub pid: i32,
    /// Its effective uid when it connected.
    pub uid: u32,
    /// Its effective gid when it connected.
    pub gid: u32,
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "uid {} gid {} pid {}", self.uid, self.gid, self.pid)
    }
}

/// The peer of `stream`, as the kernel recorded it at `connect`.
pub fn peer(stream: &UnixStream) -> io::Result<Peer> {
    let cred = rustix::net::sockopt::socket_peercred(stream)?;
    Ok(Peer {
        pid: cred.pid.as_raw_nonzero().get(),
        uid: cred.uid.as_raw(),
        gid: cred.gid.as_raw(),
    })
}

/// Who the agent serves, and how much.
#[derive(Clone, Debug)]
pub struct Policy {
    /// The agent's own effective uid.
    pub uid: u32,
    /// The group let in, if any.
    pub group: Option<AllowGroup>,
}

impl Policy {
    /// The agent's user and root, plus `group`.
    pub fn new(group: Option<AllowGroup>) -> Policy {
        Policy {
            uid: grace_std::private::effective_uid(),
            group,
        }
    }

    /// Whether `peer` is the agent's own user or root, who count in the
    /// totals of connections and watches only, never in a share.
    pub fn trusted(&self, peer: &Peer) -> bool {
        peer.uid == self.uid || peer.uid == 0
    }

    /// What `peer` may do, or why it is refused.
    pub fn admit(&self, peer: &Peer) -> Result<Access, Refused> {
        if self.trusted(peer) {
            return Ok(Access::ReadWrite);
        }
        if let Some(group) = &self.group
            && (peer.gid == group.gid || supplementary_groups(peer.pid).contains(&group.gid))
        {
            return Ok(group.access);
        }
        Err(Refused {
            uid: peer.uid,
            agent_uid: self.uid,
            group: self.group.as_ref().map(|g| g.name.clone()),
        })
    }
}

/// A peer [`Policy::admit`] refuses: neither the agent's user, nor root,
/// nor in its allowed group. It prints the reason the peer is told.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refused {
    /// The peer's uid.
    pub uid: u32,
    /// The agent's own uid.
    pub agent_uid: u32,
    /// The group let in (`--allow-group`), if any.
    pub group: Option<String>,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "permission denied for uid {}: this agent serves ",
            self.uid
        )?;
        match &self.group {
            Some(group) => write!(
                f,
                "its own user (uid {}), root and group {group} only",
                self.agent_uid
            ),
            None => write!(
                f,
                "its own user (uid {}) and root only; `--allow-group GROUP[:ro|:rw]` lets a group in",
                self.agent_uid
            ),
        }
    }
}

impl std::error::Error for Refused {}

/// The supplementary groups of process `pid` (the `Groups:` line of its
/// `/proc` status); none if it cannot be read. `SO_PEERCRED` has only the
/// effective gid; the peer is still connected, so its pid is still its own.
fn supplementary_groups(pid: i32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status.lines().find_map(|l| {
                l.strip_prefix("Groups:").map(|g| {
                    g.split_whitespace()
                        .filter_map(|n| n.parse().ok())
                        .collect()
                })
            })
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_group_parses_name_number_and_access() {
        let groups = "root:x:0:\nnogroup:x:65534:\nops:x:1001:alice,bob\n";
        assert_eq!(group_id(groups, "ops"), Some(1001));
        assert_eq!(group_id(groups, "nope"), None);
        let g: AllowGroup = "1001:rw".parse().expect("a number");
        assert_eq!((g.gid, g.access), (1001, Access::ReadWrite));
        let g: AllowGroup = "1001".parse().expect("read-only by default");
        assert_eq!(g.access, Access::ReadOnly);
        assert!("ops:admin".parse::<AllowGroup>().is_err());
        assert!(":rw".parse::<AllowGroup>().is_err());
    }

    #[test]
    fn supplementary_groups_are_the_process_s_own() {
        let pid = i32::try_from(std::process::id()).expect("a pid");
        let mut from_proc = supplementary_groups(pid);
        let mut from_kernel: Vec<u32> = rustix::process::getgroups()
            .expect("groups")
            .into_iter()
            .map(|g| g.as_raw())
            .collect();
        from_proc.sort_unstable();
        from_kernel.sort_unstable();
        assert_eq!(from_proc, from_kernel);
        assert!(supplementary_groups(-1).is_empty(), "no such process");
    }

    #[test]
    fn read_only_allows_get_and_watch_only() {
        assert!(Access::ReadOnly.allows(&Request::Watch));
        assert!(Access::ReadOnly.allows(&Request::Get { name: None }));
        // The agent's own state, for `describe`.
        assert!(Access::ReadOnly.allows(&Request::Status));
        let delete = Request::Delete {
            name: "a".into(),
            options: grace_core::DeleteOptions::default(),
        };
        assert!(!Access::ReadOnly.allows(&delete));
        assert!(Access::ReadWrite.allows(&delete));
    }

    #[test]
    fn own_user_and_root_are_served_others_refused_with_the_way_in() {
        let policy = Policy {
            uid: 1000,
            group: None,
        };
        let peer = |uid, gid| Peer { pid: 1, uid, gid };
        assert_eq!(policy.admit(&peer(1000, 5)), Ok(Access::ReadWrite));
        assert_eq!(policy.admit(&peer(0, 0)), Ok(Access::ReadWrite));
        let refused = policy.admit(&peer(1001, 5)).expect_err("refused");
        assert!(refused.to_string().contains("--allow-group"), "{refused}");
        let policy = Policy {
            uid: 1000,
            group: Some(AllowGroup {
                name: "ops".into(),
                gid: 5,
                access: Access::ReadOnly,
            }),
        };
        assert_eq!(policy.admit(&peer(1001, 5)), Ok(Access::ReadOnly));
    }
}
