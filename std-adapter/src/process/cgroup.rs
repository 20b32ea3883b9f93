//! Containment in cgroup v2, where the machine offers a writable hierarchy:
//! each workload (and hook) in a cgroup of its own under one directory per
//! agent state directory. A cgroup holds every process the workload
//! started, even one that left its process group (`setsid`): `cgroup.kill`
//! kills them all, and `cgroup.events` says `populated 0` once none is
//! left.
//!
//! Whoever may write a cgroup's `cgroup.kill`, `cgroup.freeze` or
//! `cgroup.procs` can kill, freeze or take the workloads in it, so every
//! cgroup the agent makes is `0755` whatever the umask (made `0700`, then
//! opened to reading), and one that is already there is used only if it is
//! the agent's: owned by the agent's user and writable by nobody else
//! ([`NotOurs`] otherwise). A cgroup left by a crash of the agent itself
//! passes (it was made so); one another user made first does not.

use std::fmt;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The permission bits of every cgroup the agent makes: only its user
/// may write its files; others may read them.
pub const MODE: u32 = 0o755;

/// Group and others may write.
const GROUP_OTHER_WRITE: u32 = 0o022;

/// A cgroup that was there already and is not the agent's: another user
/// owns it, or group or others may write it. It is neither used nor
/// emptied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotOurs {
    /// The cgroup.
    pub path: PathBuf,
    /// Its owner's uid.
    pub owner: u32,
    /// Its permission bits.
    pub mode: u32,
    /// The agent's (effective) uid.
    pub uid: u32,
}

impl fmt::Display for NotOurs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "refusing the cgroup {} (owner uid {}, mode {:04o}): it was there already and is not \
             this agent's (uid {}, not writable by others), so whoever made it could freeze or \
             kill what runs in it; remove it (`rmdir`, once nothing runs in it)",
            self.path.display(),
            self.owner,
            self.mode & 0o7777,
            self.uid
        )
    }
}

impl std::error::Error for NotOurs {}

impl From<NotOurs> for io::Error {
    fn from(e: NotOurs) -> io::Error {
        io::Error::new(io::ErrorKind::PermissionDenied, e)
    }
}

/// Makes the cgroup `path`, `0755` whatever the umask; `Ok(false)` if it
/// was there already and is the agent's; [`NotOurs`] (as an
/// [`io::Error`] of kind `PermissionDenied`) if it is not.
fn make(path: &Path) -> io::Result<bool> {
    // `0700` at most, whatever the umask: nobody else can touch it before
    // its mode is set.
    match fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {
            fs::set_permissions(path, fs::Permissions::from_mode(MODE))?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            ours(path)?;
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Checks that the existing cgroup `path` is the agent's: a directory
/// (not a link), owned by this process's effective uid, that neither
/// group nor others may write.
fn ours(path: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(path)?;
    let uid = rustix::process::geteuid().as_raw();
    if !meta.file_type().is_dir() || meta.uid() != uid || meta.mode() & GROUP_OTHER_WRITE != 0 {
        return Err(NotOurs {
            path: path.to_path_buf(),
            owner: meta.uid(),
            mode: meta.mode(),
            uid,
        }
        .into());
    }
    Ok(())
}

/// The cgroup directory of one agent's workloads.
#[derive(Clone, Debug)]
pub struct Cgroups {
    root: PathBuf,
}

impl Cgroups {
    /// The agent's cgroup directory for the workloads of `state_dir`: a
    /// child of the agent's own cgroup on the cgroup v2 mount, created
    /// (`0755`) if missing. `Ok(None)` where there is no writable cgroup
    /// v2 hierarchy with `cgroup.kill` (Linux ≥ 5.14).
    ///
    /// # Errors
    ///
    /// [`NotOurs`] (as an [`io::Error`] of kind `PermissionDenied`) if
    /// the directory is there already and is not the agent's.
    pub fn detect(state_dir: &Path) -> io::Result<Option<Cgroups>> {
        let Some(root) = Self::root_for(state_dir) else {
            return Ok(None);
        };
        match make(&root) {
            Ok(_) => {}
            Err(e) if e.get_ref().is_some_and(|inner| inner.is::<NotOurs>()) => return Err(e),
            Err(_) => return Ok(None),
        }
        Ok(root
            .join("cgroup.kill")
            .exists()
            .then_some(Cgroups { root }))
    }

    /// Where the cgroup directory of `state_dir`'s workloads is (whether
    /// it exists or not).
    fn root_for(state_dir: &Path) -> Option<PathBuf> {
        let mount = cgroup2_mount()?;
        let own = fs::read_to_string("/proc/self/cgroup").ok()?;
        let own = own.lines().find_map(|l| l.strip_prefix("0::"))?;
        let parent = mount.join(own.trim_start_matches('/'));
        let key = super::file_name::fnv1a(
            state_dir
                .canonicalize()
                .ok()?
                .as_os_str()
                .as_encoded_bytes(),
        );
        Some(parent.join(format!("grace-{key:016x}")))
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A new, empty cgroup `name`, `0755` (one the agent left in a crash
    /// is emptied first; one still queued for removal is removed first).
    ///
    /// # Errors
    ///
    /// [`NotOurs`] (as an [`io::Error`] of kind `PermissionDenied`) if
    /// the cgroup is there already and is not the agent's: it is left as
    /// it is.
    pub fn create(&self, name: &str) -> io::Result<PathBuf> {
        let path = self.root.join(name);
        super::removal::settle(&path, super::removal::Kind::Dir);
        if !make(&path)? {
            kill(&path)?;
        }
        Ok(path)
    }

    /// The cgroups in the directory (to find those no workload owns).
    pub fn children(&self) -> Vec<PathBuf> {
        fs::read_dir(&self.root)
            .map(|dir| {
                dir.filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Moves process `pid` into `cgroup`.
pub fn add(cgroup: &Path, pid: u32) -> io::Result<()> {
    fs::write(cgroup.join("cgroup.procs"), pid.to_string())
}

/// SIGKILLs every process in `cgroup` (a cgroup already gone is fine).
pub fn kill(cgroup: &Path) -> io::Result<()> {
    match fs::write(cgroup.join("cgroup.kill"), "1") {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Whether any process is left in `cgroup` (one that cannot be read
/// counts as populated, unless it is gone).
pub fn is_populated(cgroup: &Path) -> bool {
    match fs::read_to_string(cgroup.join("cgroup.events")) {
        Ok(events) => !events.lines().any(|l| l.trim() == "populated 0"),
        Err(e) => e.kind() != io::ErrorKind::NotFound,
    }
}

/// Removes an empty `cgroup` (gone already is fine).
pub fn remove(cgroup: &Path) {
    let _ = fs::remove_dir(cgroup);
}

/// Where cgroup v2 is mounted (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified`
/// on a hybrid system), from `/proc/self/mountinfo`.
fn cgroup2_mount() -> Option<PathBuf> {
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|line| {
        // Fields: id parent major:minor root mount-point options ... - type source super-options.
        let (left, right) = line.split_once(" - ")?;
        let fstype = right.split_whitespace().next()?;
        let mount = left.split_whitespace().nth(4)?;
        (fstype == "cgroup2").then(|| PathBuf::from(mount))
    })
}
