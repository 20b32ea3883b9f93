//! A pids cgroup around an agent, so that a test can make it run out of
//! threads as a machine at `pid_max` does.

use std::path::{Path, PathBuf};

/// A pids cgroup around one process: what it and its threads and children
/// may number (`pids.max`), as `pid_max` or a container's limit bounds a
/// machine. The v1 `pids` hierarchy or cgroup v2's `pids` controller;
/// the process goes back to the root group when dropped.
pub struct PidsLimit {
    dir: PathBuf,
    root: PathBuf,
}

impl PidsLimit {
    /// Puts `pid` in a new pids cgroup; `None` where none can be made.
    pub fn around(pid: u32, name: &str) -> Option<PidsLimit> {
        let v1 = Path::new("/sys/fs/cgroup/pids");
        let root = if v1.join("cgroup.procs").exists() {
            v1.to_path_buf()
        } else {
            let v2 = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
                .into_iter()
                .map(Path::new)
                .find(|r| {
                    std::fs::read_to_string(r.join("cgroup.controllers"))
                        .is_ok_and(|c| c.split_whitespace().any(|c| c == "pids"))
                })?;
            std::fs::write(v2.join("cgroup.subtree_control"), "+pids").ok()?;
            v2.to_path_buf()
        };
        let dir = root.join(name);
        std::fs::create_dir(&dir).ok()?;
        let limit = PidsLimit { dir, root };
        std::fs::write(limit.dir.join("cgroup.procs"), pid.to_string()).ok()?;
        Some(limit)
    }

    /// No new thread or process in the group (those it holds run on):
    /// its limit below what it holds, so that threads ending meanwhile
    /// make no room.
    pub fn full(&self) {
        std::fs::write(self.dir.join("pids.max"), "1").expect("pids.max");
    }

    /// No limit again.
    pub fn lift(&self) {
        std::fs::write(self.dir.join("pids.max"), "max").expect("pids.max");
    }
}

impl Drop for PidsLimit {
    fn drop(&mut self) {
        if let Ok(procs) = std::fs::read_to_string(self.dir.join("cgroup.procs")) {
            for pid in procs.lines() {
                let _ = std::fs::write(self.root.join("cgroup.procs"), pid);
            }
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}
