//! The workload table: one small file per running workload and pre-stop
//! hook in the agent's state directory, saying which process (and cgroup)
//! it is. Written before the process may run its command, and removed only
//! once the process and everything it started are known to be gone, so a
//! restarted agent finds every workload its predecessor left.
//!
//! Not synced to disk: what it says matters only on this boot (after a
//! reboot the processes are gone whatever it says), and what an agent
//! wrote survives the agent's own crash in the page cache. Each file is
//! written under a temporary name and renamed into place, so a reader never
//! sees half a record.

use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::identity::ProcessIdentity;
use super::removal;

/// One running workload or hook, as written to the table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadRecord {
    /// The object it belongs to.
    pub object: String,
    /// The container's index.
    pub container: usize,
    /// A pre-stop hook rather than the container's own command.
    pub hook: bool,
    /// Its process, the leader of its process group.
    pub process: ProcessIdentity,
    /// Its cgroup, when workloads are contained in cgroups.
    #[serde(default)]
    pub cgroup: Option<PathBuf>,
}

impl WorkloadRecord {
    /// The file (and cgroup) name of a workload: the object's name in hex
    /// (any name makes a safe file name), the container, the kind.
    pub fn file_name(object: &str, container: usize, hook: bool) -> String {
        let hex: String = object.bytes().map(|b| format!("{b:02x}")).collect();
        format!("{hex}.{container}.{}", if hook { "hook" } else { "main" })
    }

    /// The object, container and kind a file (or cgroup) name stands for
    /// ([`file_name`](Self::file_name)'s inverse), if it is one.
    pub fn parse_file_name(name: &str) -> Option<(String, usize, bool)> {
        let mut parts = name.split('.');
        let (hex, container, kind) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || hex.len() % 2 != 0 {
            return None;
        }
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(hex.get(i..i.checked_add(2)?)?, 16).ok())
            .collect::<Option<Vec<u8>>>()?;
        let hook = match kind {
            "hook" => true,
            "main" => false,
            _ => return None,
        };
        Some((
            String::from_utf8(bytes).ok()?,
            container.parse().ok()?,
            hook,
        ))
    }
}

/// The old name of [`WorkloadTable`], which said the same as
/// `grace_core::Table` (the lifecycles' table).
#[deprecated(note = "renamed WorkloadTable (grace_core::Table is the lifecycles' table)")]
pub type Table = WorkloadTable;

/// The workload table: its directory.
#[derive(Clone, Debug)]
pub struct WorkloadTable {
    dir: PathBuf,
}

impl WorkloadTable {
    /// The table in `dir`, created if missing; private (`0700`, its files
    /// `0600`) whatever the umask: it says which processes to signal.
    pub fn open(dir: &Path) -> io::Result<WorkloadTable> {
        crate::private::private_dir(dir, 0o700).map_err(io::Error::other)?;
        Ok(WorkloadTable {
            dir: dir.to_owned(),
        })
    }

    /// Writes `record` (a new file renamed into place). A removal of the
    /// same record still waiting ([`remove_soon`](Self::remove_soon)) is
    /// done first, so that it cannot remove this one.
    pub fn write(&self, record: &WorkloadRecord) -> io::Result<()> {
        let name = WorkloadRecord::file_name(&record.object, record.container, record.hook);
        removal::settle(&self.dir.join(&name), removal::Kind::File);
        let tmp = self.dir.join(format!("{name}.tmp"));
        let bytes = serde_json::to_vec(record).map_err(io::Error::other)?;
        let mut file = {
            use std::os::unix::fs::OpenOptionsExt;
            fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?
        };
        file.write_all(&bytes)?;
        fs::rename(&tmp, self.dir.join(name))
    }

    /// Removes a workload's record (none is fine).
    pub fn remove(&self, object: &str, container: usize, hook: bool) -> io::Result<()> {
        match fs::remove_file(
            self.dir
                .join(WorkloadRecord::file_name(object, container, hook)),
        ) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Removes a workload's record soon, off this thread ([`removal`]):
    /// a crash before it is done leaves the record of a process that is
    /// gone, which the next agent reports gone and removes.
    pub fn remove_soon(&self, object: &str, container: usize, hook: bool) {
        removal::remove(
            self.dir
                .join(WorkloadRecord::file_name(object, container, hook)),
            removal::Kind::File,
        );
    }

    /// Every record in the table (after the removals still waiting). A file that cannot be read as one (a
    /// write cut short by a crash is never renamed into place) is skipped
    /// and named in the second list.
    pub fn load(&self) -> io::Result<(Vec<WorkloadRecord>, Vec<PathBuf>)> {
        removal::flush();
        let mut records = Vec::new();
        let mut unreadable = Vec::new();
        for entry in fs::read_dir(&self.dir)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "tmp") {
                let _ = fs::remove_file(&path);
                continue;
            }
            match fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice::<WorkloadRecord>(&b).ok())
            {
                Some(record) => records.push(record),
                None => unreadable.push(path),
            }
        }
        records.sort_by(|a, b| {
            (&a.object, a.container, a.hook).cmp(&(&b.object, b.container, b.hook))
        });
        Ok((records, unreadable))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_written_is_loaded_until_removed() {
        let dir = tempfile::tempdir().expect("tmp");
        let table = WorkloadTable::open(&dir.path().join("w")).expect("open");
        let record = WorkloadRecord {
            object: "web/1 ü".into(),
            container: 2,
            hook: true,
            process: ProcessIdentity {
                pid: 42,
                start_time: 7,
                boot_id: "b".into(),
            },
            cgroup: None,
        };
        table.write(&record).expect("write");
        std::fs::write(dir.path().join("w/x.tmp"), b"{").expect("tmp");
        std::fs::write(dir.path().join("w/junk"), b"{").expect("junk");
        let (records, unreadable) = table.load().expect("load");
        assert_eq!(records, vec![record.clone()]);
        assert_eq!(unreadable, vec![dir.path().join("w/junk")]);
        assert!(!dir.path().join("w/x.tmp").exists());
        assert_eq!(
            WorkloadRecord::parse_file_name(&WorkloadRecord::file_name("web/1 ü", 2, true)),
            Some(("web/1 ü".to_owned(), 2, true))
        );
        assert_eq!(WorkloadRecord::parse_file_name("junk"), None);
        table.remove("web/1 ü", 2, true).expect("remove");
        table.remove("web/1 ü", 2, true).expect("twice");
        assert!(table.load().expect("load").0.is_empty());
        // Removed in the background; written again meanwhile, it stays.
        table.write(&record).expect("write");
        table.remove_soon("web/1 ü", 2, true);
        table.write(&record).expect("written again");
        assert_eq!(table.load().expect("load").0, vec![record.clone()]);
        table.remove_soon("web/1 ü", 2, true);
        assert!(table.load().expect("load").0.is_empty());
    }
}
