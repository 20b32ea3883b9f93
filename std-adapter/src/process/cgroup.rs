//! Containment in cgroup v2, where the machine offers a writable hierarchy:
//! each workload (and hook) in a cgroup of its own under one directory per
//! agent state directory. A cgroup holds every process the workload
//! started, even one that left its process group (`setsid`): `cgroup.kill`
//! kills them all, and `cgroup.events` says `populated 0` once none is
//! left.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The cgroup directory of one agent's workloads.
#[derive(Clone, Debug)]
pub struct Cgroups {
    root: PathBuf,
}

impl Cgroups {
    /// The agent's cgroup directory for the workloads of `state_dir`: a
    /// child of the agent's own cgroup on the cgroup v2 mount, created if
    /// missing. `None` where there is no writable cgroup v2 hierarchy
    /// with `cgroup.kill` (Linux ≥ 5.14).
    pub fn detect(state_dir: &Path) -> Option<Cgroups> {
        let mount = cgroup2_mount()?;
        let own = fs::read_to_string("/proc/self/cgroup").ok()?;
        let own = own.lines().find_map(|l| l.strip_prefix("0::"))?;
        let parent = mount.join(own.trim_start_matches('/'));
        let key = fnv1a(
            state_dir
                .canonicalize()
                .ok()?
                .as_os_str()
                .as_encoded_bytes(),
        );
        let root = parent.join(format!("grace-{key:016x}"));
        match fs::create_dir(&root) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(_) => return None,
        }
        root.join("cgroup.kill")
            .exists()
            .then_some(Cgroups { root })
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A new, empty cgroup `name` (one left by a crash is emptied first;
    /// one still queued for removal is removed first).
    pub fn create(&self, name: &str) -> io::Result<PathBuf> {
        let path = self.root.join(name);
        super::removal::settle(&path, super::removal::Kind::Dir);
        match fs::create_dir(&path) {
            Ok(()) => Ok(path),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                kill(&path)?;
                Ok(path)
            }
            Err(e) => Err(e),
        }
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

/// FNV-1a, 64 bits: a short stable name for a directory path.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
