//! How a container's process (and its hooks) is started as its pod says:
//! the environment it gets, the directory it starts in and the user it
//! runs as, worked out from the stored container when it starts.
//!
//! - Environment: with [`Environment::Container`] only the container's
//!   own entries, after a default `PATH`, `HOSTNAME` (the pod's name) and
//!   `HOME` (from the user's passwd entry, else `/`), each of which an
//!   entry may set; nothing of the agent's. A value's `$(NAME)` refers to
//!   an earlier entry, and (with [`Environment::Container`]) the command's
//!   and arguments' to any entry (`$$` is a `$`; an unknown `$(NAME)`
//!   stays as written), as the kubelet expands them. A field reference is
//!   read from the stored pod now.
//! - Working directory: created if missing (as a container runtime
//!   creates it), the process started there.
//! - User: a process with a `securityContext` runs as its uid, gid and
//!   groups through `setpriv` (util-linux), which sets the groups, then
//!   the gid, then the uid before it `exec`s the command; without one, as
//!   the agent's user. An agent that is not root can run processes as its
//!   own user only.

use std::path::{Path, PathBuf};

use crate::store::{EnvSource, StoredContainer, StoredObject, label_key, split_key};

/// The `PATH` a container gets unless its environment sets one (what
/// containerd gives a container whose image sets none).
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Which environment the processes the actuator starts get.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Environment {
    /// The actuator's own, with the container's entries added: for a
    /// supervisor that wraps one command of its user's (`grace run`).
    #[default]
    Inherit,
    /// Only the container's: its entries, `HOSTNAME`, `PATH` and `HOME`;
    /// and `$(NAME)` in the command expanded (`$$` is a `$`), as the
    /// kubelet runs a pod's container (what a node agent gives the pods it
    /// runs).
    Container,
}

/// Why a container cannot be started as its pod says.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LaunchError {
    /// The pod asks for something it must not have (`runAsNonRoot` with
    /// uid 0, a field reference grace cannot read): the kubelet's
    /// `CreateContainerConfigError`. The container is not started.
    Config(String),
    /// The process cannot be started (its program is missing, the agent
    /// cannot change user): the runtime's `ContainerCannotRun`.
    CannotRun(String),
}

impl LaunchError {
    /// The reason Kubernetes reports for it.
    pub fn reason(&self) -> &'static str {
        match self {
            LaunchError::Config(_) => "CreateContainerConfigError",
            LaunchError::CannotRun(_) => "ContainerCannotRun",
        }
    }

    /// What went wrong.
    pub fn message(&self) -> &str {
        match self {
            LaunchError::Config(m) | LaunchError::CannotRun(m) => m,
        }
    }
}

impl std::fmt::Display for LaunchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for LaunchError {}

/// A process to start: its arguments (a privilege-dropping prefix
/// included), environment and directory.
#[derive(Clone, Debug, Default)]
pub(crate) struct Launch {
    /// The program the container names (its command's first word, after
    /// `$(NAME)`), to check before it is started.
    pub(crate) program: String,
    /// Program and arguments, `setpriv …` first when the user changes.
    pub(crate) argv: Vec<String>,
    /// The whole environment ([`Environment::Container`]), or the entries
    /// added to the actuator's.
    pub(crate) env: Vec<(String, String)>,
    /// Whether `env` is the whole environment.
    pub(crate) env_only: bool,
    /// The directory to start in.
    pub(crate) cwd: Option<PathBuf>,
}

impl Launch {
    /// The `PATH` a program name is looked up in.
    pub(crate) fn path(&self) -> Option<std::ffi::OsString> {
        let set = self.env.iter().rev().find(|(k, _)| k == "PATH");
        match set {
            Some((_, v)) => Some(v.into()),
            None if self.env_only => Some(DEFAULT_PATH.into()),
            None => std::env::var_os("PATH"),
        }
    }

    /// Sets the environment and directory on `command`.
    pub(crate) fn apply(&self, command: &mut std::process::Command) {
        if self.env_only {
            command.env_clear();
        }
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(dir) = &self.cwd {
            command.current_dir(dir);
        }
    }
}

/// How container `index` of `stored` (named `name`) is started: its
/// command with `$(NAME)` expanded (`hook`: `sh -c HOOK` instead, as
/// written), in its environment, directory and user. The directory is
/// created if missing.
pub(crate) fn container(
    name: &str,
    stored: &StoredObject,
    index: usize,
    hook: Option<&str>,
    environment: Environment,
) -> Result<Launch, LaunchError> {
    let Some(container) = stored.containers.get(index) else {
        return Err(LaunchError::CannotRun(format!("no container {index}")));
    };
    let entries = entries(name, stored, container)?;
    let argv = match hook {
        Some(line) => vec!["sh".to_owned(), "-c".to_owned(), line.to_owned()],
        // A pod's command, as the kubelet runs it.
        None if environment == Environment::Container => container
            .command
            .iter()
            .map(|arg| expand(arg, |var| lookup(&entries, var)))
            .collect(),
        // A supervisor's own command (`grace run`): as written.
        None => container.command.clone(),
    };
    let identity = identity(name, stored.uid(), container)?;
    let mut env = Vec::new();
    let env_only = environment == Environment::Container;
    if env_only {
        let uid = identity
            .as_ref()
            .map_or_else(|| rustix::process::geteuid().as_raw(), |i| i.uid);
        let home = passwd(uid).map_or_else(|| "/".to_owned(), |p| p.home);
        env.push(("PATH".to_owned(), DEFAULT_PATH.to_owned()));
        env.push(("HOSTNAME".to_owned(), hostname(name)));
        env.push(("HOME".to_owned(), home));
    }
    // Later entries of the same name win (as the kubelet's map does),
    // keeping the first one's place.
    for (key, value) in entries {
        match env.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => env.push((key, value)),
        }
    }
    let program = argv.first().cloned().unwrap_or_default();
    let mut argv = argv;
    if let Some(identity) = identity {
        let mut prefix = identity.setpriv()?;
        prefix.append(&mut argv);
        argv = prefix;
    }
    let cwd = match &container.working_dir {
        Some(dir) => {
            // As a container runtime does: a missing directory is made.
            std::fs::create_dir_all(dir).map_err(|e| {
                LaunchError::CannotRun(format!("cannot create the working directory {dir}: {e}"))
            })?;
            Some(PathBuf::from(dir))
        }
        None => None,
    };
    Ok(Launch {
        program,
        argv,
        env,
        env_only,
        cwd,
    })
}

/// The container's entries, resolved in order: a value expanded against
/// the entries before it, a field reference read from the pod.
fn entries(
    name: &str,
    stored: &StoredObject,
    container: &StoredContainer,
) -> Result<Vec<(String, String)>, LaunchError> {
    let mut resolved: Vec<(String, String)> = Vec::new();
    for var in &container.env {
        let value = match &var.source {
            EnvSource::Value(value) => expand(value, |v| lookup(&resolved, v)),
            EnvSource::FieldRef(path) => field(name, stored, path).ok_or_else(|| {
                LaunchError::Config(format!(
                    "container {}: env {}: unsupported fieldPath \"{path}\"",
                    container.name, var.name
                ))
            })?,
        };
        match resolved.iter_mut().find(|(k, _)| *k == var.name) {
            Some(slot) => slot.1 = value,
            None => resolved.push((var.name.clone(), value)),
        }
    }
    Ok(resolved)
}

fn lookup<'a>(entries: &'a [(String, String)], name: &str) -> Option<&'a str> {
    entries
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// A pod's host name, as the kubelet makes it: the name (without its
/// namespace), cut to 63 bytes without a trailing `-` or `.`.
fn hostname(key: &str) -> String {
    let name = split_key(key).1;
    let cut = name.get(..name.len().min(63)).unwrap_or(name);
    cut.trim_end_matches(['-', '.']).to_owned()
}

/// The value of the pod's field `path`, if it is one a process may read;
/// `key` is the object's store key (its namespace and name).
fn field(key: &str, stored: &StoredObject, path: &str) -> Option<String> {
    let (namespace, name) = split_key(key);
    Some(match path {
        "metadata.name" => name.to_owned(),
        "metadata.namespace" => namespace.to_owned(),
        "metadata.uid" => stored.uid().to_owned(),
        "spec.nodeName" => stored.node.clone().unwrap_or_default(),
        // A label that is not set is empty, as in Kubernetes.
        _ => stored
            .labels
            .get(label_key(path)?)
            .cloned()
            .unwrap_or_default(),
    })
}

/// `input` with every `$(NAME)` that `mapping` knows replaced by its value,
/// as the kubelet expands: `$$` is `$`, an unknown `$(NAME)` and an
/// unclosed `$(` stay as written, any other `$` is itself.
pub(crate) fn expand<'a>(input: &str, mapping: impl Fn(&str) -> Option<&'a str>) -> String {
    let bytes = input.as_bytes();
    let mut out = String::with_capacity(input.len());
    let mut from = 0;
    let mut i = 0;
    while i < bytes.len() {
        let next = bytes.get(i.saturating_add(1)).copied();
        if bytes.get(i) != Some(&b'$') || next.is_none() {
            i = i.saturating_add(1);
            continue;
        }
        out.push_str(input.get(from..i).unwrap_or_default());
        let rest = input.get(i.saturating_add(1)..).unwrap_or_default();
        match next {
            Some(b'$') => {
                out.push('$');
                i = i.saturating_add(2);
            }
            Some(b'(') => match rest.find(')') {
                Some(close) => {
                    let var = rest.get(1..close).unwrap_or_default();
                    match mapping(var) {
                        Some(value) => out.push_str(value),
                        None => {
                            out.push_str("$(");
                            out.push_str(var);
                            out.push(')');
                        }
                    }
                    i = i.saturating_add(close).saturating_add(2);
                }
                None => {
                    out.push_str("$(");
                    i = i.saturating_add(2);
                }
            },
            _ => {
                out.push('$');
                i = i.saturating_add(1);
            }
        }
        from = i;
    }
    out.push_str(input.get(from..).unwrap_or_default());
    out
}

/// The user and groups a process runs as.
#[derive(Debug)]
struct Identity {
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
}

impl Identity {
    /// The `setpriv` prefix that runs a command as this identity.
    fn setpriv(&self) -> Result<Vec<String>, LaunchError> {
        let Some(setpriv) = program("setpriv") else {
            return Err(LaunchError::CannotRun(
                "securityContext: running as another user needs setpriv (util-linux) on the node: not found in PATH".to_owned(),
            ));
        };
        let groups: Vec<String> = self.groups.iter().map(u32::to_string).collect();
        Ok(vec![
            setpriv.display().to_string(),
            format!("--reuid={}", self.uid),
            format!("--regid={}", self.gid),
            format!("--groups={}", groups.join(",")),
            "--".to_owned(),
        ])
    }
}

/// The identity container `c` of pod `name` (uid `pod_uid`) runs as; `None`: the agent's
/// own. Refuses uid 0 under `runAsNonRoot` with the kubelet's messages, and
/// another user when the agent is not root.
fn identity(
    name: &str,
    pod_uid: &str,
    c: &StoredContainer,
) -> Result<Option<Identity>, LaunchError> {
    let sc = &c.security_context;
    let agent_uid = rustix::process::geteuid().as_raw();
    let agent_gid = rustix::process::getegid().as_raw();
    let (namespace, name) = split_key(name);
    let pod = |uid: &str| {
        format!(
            "(pod: \"{name}_{namespace}({uid})\", container: {})",
            c.name
        )
    };
    if sc.run_as_non_root == Some(true) {
        match sc.run_as_user {
            Some(0) => {
                return Err(LaunchError::Config(format!(
                    "container's runAsUser breaks non-root policy {}",
                    pod(pod_uid)
                )));
            }
            None if agent_uid == 0 => {
                return Err(LaunchError::Config(format!(
                    "container has runAsNonRoot and image will run as root {}",
                    pod(pod_uid)
                )));
            }
            _ => {}
        }
    }
    if sc.run_as_user.is_none() && sc.run_as_group.is_none() && sc.supplemental_groups.is_empty() {
        return Ok(None);
    }
    let uid = sc.run_as_user.unwrap_or(agent_uid);
    let entry = passwd(uid);
    // A uid without a group takes its passwd entry's, else 0, as a
    // container runtime does; no uid given, the agent's gid stays.
    let gid = match (sc.run_as_group, sc.run_as_user) {
        (Some(gid), _) => gid,
        (None, Some(_)) => entry.as_ref().map_or(0, |p| p.gid),
        (None, None) => agent_gid,
    };
    if agent_uid != 0 {
        if uid == agent_uid && gid == agent_gid && sc.supplemental_groups.is_empty() {
            return Ok(None);
        }
        return Err(LaunchError::CannotRun(format!(
            "securityContext asks for uid {uid}, gid {gid}{}: the agent runs as uid {agent_uid}, not as root, and can run processes as its own user only",
            if sc.supplemental_groups.is_empty() {
                String::new()
            } else {
                format!(", supplementalGroups {:?}", sc.supplemental_groups)
            }
        )));
    }
    // The primary group, the user's groups in /etc/group (Kubernetes'
    // default policy merges them), then the pod's supplemental groups.
    let mut groups = vec![gid];
    if let Some(entry) = &entry {
        groups.extend(member_of(&entry.name));
    }
    groups.extend(sc.supplemental_groups.iter().copied());
    let mut seen = Vec::new();
    groups.retain(|g| {
        let new = !seen.contains(g);
        seen.push(*g);
        new
    });
    Ok(Some(Identity { uid, gid, groups }))
}

/// A user's passwd entry: what a process running as it needs.
struct Passwd {
    name: String,
    gid: u32,
    home: String,
}

/// The passwd entry of `uid` (`/etc/passwd`), if any.
fn passwd(uid: u32) -> Option<Passwd> {
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    text.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        let (name, id, gid, home) = (
            fields.first()?,
            fields.get(2)?,
            fields.get(3)?,
            fields.get(5)?,
        );
        (id.parse::<u32>().ok()? == uid).then(|| Passwd {
            name: (*name).to_owned(),
            gid: gid.parse().unwrap_or(0),
            home: if home.is_empty() {
                "/".to_owned()
            } else {
                (*home).to_owned()
            },
        })
    })
}

/// The gids of the groups `/etc/group` lists `user` in.
fn member_of(user: &str) -> Vec<u32> {
    let Ok(text) = std::fs::read_to_string("/etc/group") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            let gid = fields.get(2)?.parse::<u32>().ok()?;
            fields.get(3)?.split(',').any(|m| m == user).then_some(gid)
        })
        .collect()
}

/// The shell that gates a process's start: the agent's `sh`, whatever
/// `PATH` the container's environment sets.
pub(crate) fn shell() -> PathBuf {
    static SHELL: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    SHELL
        .get_or_init(|| program("sh").unwrap_or_else(|| PathBuf::from("sh")))
        .clone()
}

/// Where the agent finds one of the programs it starts processes through
/// (its own `PATH`, then the default one).
fn program(name: &str) -> Option<PathBuf> {
    let own = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&own)
        .chain(std::env::split_paths(DEFAULT_PATH))
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expansion_follows_the_kubelet() {
        let vars = [("A", "1"), ("B", "two")];
        let map = |v: &str| vars.iter().find(|(k, _)| *k == v).map(|(_, x)| *x);
        let cases = [
            ("$(A)", "1"),
            ("x$(A)y$(B)", "x1ytwo"),
            ("$$(A)", "$(A)"),
            ("$$$(A)", "$1"),
            ("$(C)", "$(C)"),
            ("$(A", "$(A"),
            ("$A", "$A"),
            ("a$", "a$"),
            ("$", "$"),
            ("ü$(B)ü", "ütwoü"),
            ("$()", "$()"),
        ];
        for (input, want) in cases {
            assert_eq!(expand(input, map), want, "{input}");
        }
    }
}
