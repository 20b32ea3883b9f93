//! Who a client certificate is, and what it may do: the same access as
//! on the socket ([`crate::access`]).
//!
//! The CA is the agent's and its key never leaves the data directory, so
//! every certificate that passed the TLS handshake was issued by the
//! agent's owner: its subject is trusted. CN is the user, each O a group
//! (the Kubernetes convention). The agent's own user reads and writes; a
//! certificate naming the `--allow-group` group as an O has that group's
//! access; anyone else is refused (403).

use rustls::pki_types::CertificateDer;

use crate::access::{Access, AllowGroup};

/// A client, as its certificate names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Identity {
    /// The certificate's CN.
    pub user: String,
    /// The certificate's O values.
    pub groups: Vec<String>,
}

impl Identity {
    /// The identity in a client's certificate chain (its first
    /// certificate); `None` without one, or one that cannot be read.
    pub fn of(chain: Option<&[CertificateDer<'_>]>) -> Option<Identity> {
        let der = chain?.first()?;
        let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
        let subject = cert.subject();
        let user = subject
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())?
            .to_owned();
        let groups = subject
            .iter_organization()
            .filter_map(|o| o.as_str().ok().map(str::to_owned))
            .collect();
        Some(Identity { user, groups })
    }

    /// What this client may do: `None` if nothing.
    pub fn access(&self, owner: &str, group: Option<&AllowGroup>) -> Option<Access> {
        if self.user == owner {
            return Some(Access::ReadWrite);
        }
        let group = group?;
        self.groups.contains(&group.name).then_some(group.access)
    }
}

/// The name of the user this process runs as: its `/etc/passwd` entry,
/// or the uid as a number when there is none.
pub(crate) fn own_user() -> String {
    let uid = rustix::process::geteuid().as_raw();
    std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|passwd| user_name(&passwd, uid))
        .unwrap_or_else(|| uid.to_string())
}

/// The name of `uid` in the text of `/etc/passwd`.
fn user_name(passwd: &str, uid: u32) -> Option<String> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id: u32 = fields.nth(1)?.parse().ok()?;
        (id == uid).then(|| name.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_reads_and_writes_group_member_has_the_group_s_access_others_nothing() {
        let group = AllowGroup {
            name: "ops".into(),
            gid: 5,
            access: Access::ReadOnly,
        };
        let who = |user: &str, groups: &[&str]| Identity {
            user: user.into(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        };
        assert_eq!(who("me", &[]).access("me", None), Some(Access::ReadWrite));
        assert_eq!(
            who("al", &["ops"]).access("me", Some(&group)),
            Some(Access::ReadOnly)
        );
        assert_eq!(who("al", &["dev"]).access("me", Some(&group)), None);
        assert_eq!(who("al", &["ops"]).access("me", None), None);
    }

    #[test]
    fn user_name_reads_passwd() {
        let passwd = "root:x:0:0:root:/root:/bin/sh\nann:x:1000:1000::/home/ann:/bin/sh\n";
        assert_eq!(user_name(passwd, 1000).as_deref(), Some("ann"));
        assert_eq!(user_name(passwd, 7), None);
    }
}
