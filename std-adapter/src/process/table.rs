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

/// The extension of a start marker ([`WorkloadTable::marker`]).
const MARKER: &str = "ran";

/// The longest object name part of a table file name: the hex of 64
/// bytes (every name of the versions that allowed at most 63 is whole).
const HEX_MAX: usize = 128;

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
    /// When its stop signal went out (milliseconds on the runtime's
    /// clock, which counts from this boot), once it did: a later agent
    /// does not send it again, and counts the 2 s before SIGKILL from then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_signal_sent: Option<u64>,
    /// When SIGKILL is due (milliseconds on the runtime's clock), once its
    /// stop signal went out: what a later agent carries out if the object
    /// is gone by then (a force delete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigkill_at: Option<u64>,
    /// Its gate leaves a start marker ([`WorkloadTable::marker`]) before
    /// the command runs (false in records of agents that did not).
    #[serde(default)]
    pub marks_start: bool,
}

impl WorkloadRecord {
    /// The file (and cgroup) name of a workload: the object's name in hex
    /// (any name makes a safe file name), the container, the kind. The hex
    /// of a name over 64 bytes is cut to 128 characters, the last 17 a
    /// hash of the whole (`~` and 16 hex digits), so that every file name
    /// of the table fits a path component: the record inside names the
    /// object.
    pub fn file_name(object: &str, container: usize, hook: bool) -> String {
        let hex: String = object.bytes().map(|b| format!("{b:02x}")).collect();
        let hex = super::file_name::fit(hex, HEX_MAX);
        format!("{hex}.{container}.{}", if hook { "hook" } else { "main" })
    }

    /// The record in the file `path`, if it holds one that can be read.
    pub fn from_file(path: &Path) -> Option<WorkloadRecord> {
        serde_json::from_slice(&fs::read(path).ok()?).ok()
    }

    /// The object, container and kind a file (or cgroup) name stands for
    /// ([`file_name`](Self::file_name)'s inverse), if it is one whose
    /// object's name was not cut.
    pub fn parse_file_name(name: &str) -> Option<(String, usize, bool)> {
        let mut parts = name.split('.');
        let (hex, container, kind) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || hex.len() % 2 != 0 || super::file_name::is_cut(hex) {
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

/// What a workload's waiter wrote into its start marker
/// ([`WorkloadTable::marker`]) when its command ended: the status as a
/// shell reports it (the exit code, or 128 + the signal that ended it),
/// and when it was written (the file's modification time). `None` while
/// the command runs, or if its waiter was killed with it (SIGKILL to the
/// whole group) and wrote nothing.
pub(crate) fn exit_status(marker: &Path) -> Option<(i32, std::time::SystemTime)> {
    let text = fs::read_to_string(marker).ok()?;
    let code = text.trim().parse().ok()?;
    let written = fs::metadata(marker).and_then(|m| m.modified()).ok()?;
    Some((code, written))
}

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
        self.write_named(&name, record)
    }

    /// Writes the record of a process about to be started: as
    /// [`write`](Self::write), and an earlier process's start marker
    /// ([`marker`](Self::marker)) goes first.
    pub fn write_new(&self, record: &WorkloadRecord) -> io::Result<()> {
        let name = WorkloadRecord::file_name(&record.object, record.container, record.hook);
        removal::settle(&self.dir.join(&name), removal::Kind::File);
        let marker = self.marker(&record.object, record.container, record.hook);
        removal::settle(&marker, removal::Kind::File);
        match fs::remove_file(&marker) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        self.write_named(&name, record)
    }

    /// The start marker of a workload: a file its gate creates once it is
    /// opened, just before the command runs. A record without one stands
    /// for a process that never ran its command.
    pub fn marker(&self, object: &str, container: usize, hook: bool) -> PathBuf {
        let name = WorkloadRecord::file_name(object, container, hook);
        self.dir.join(format!("{name}.{MARKER}"))
    }

    /// Whether the workload's command was started ([`marker`](Self::marker)).
    pub fn ran(&self, object: &str, container: usize, hook: bool) -> bool {
        self.marker(object, container, hook).exists()
    }

    /// The record of a workload, if there is one that can be read.
    pub fn read(&self, object: &str, container: usize, hook: bool) -> Option<WorkloadRecord> {
        WorkloadRecord::from_file(
            &self
                .dir
                .join(WorkloadRecord::file_name(object, container, hook)),
        )
    }

    fn write_named(&self, name: &str, record: &WorkloadRecord) -> io::Result<()> {
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

    /// Removes a workload's record soon, off this thread (`removal`):
    /// a crash before it is done leaves the record of a process that is
    /// gone, which the next agent reports gone and removes.
    pub fn remove_soon(&self, object: &str, container: usize, hook: bool) {
        // The marker first: a crash in between leaves a record with no
        // marker only for a process that is gone, whose exit is taken.
        removal::remove(self.marker(object, container, hook), removal::Kind::File);
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
            if path.extension().is_some_and(|e| e == MARKER) {
                continue;
            }
            match WorkloadRecord::from_file(&path) {
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
            stop_signal_sent: None,
            sigkill_at: None,
            marks_start: true,
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

    /// A 253-byte name (a Kubernetes pod name) makes file names that fit a
    /// path component, written, loaded and removed as any; a name of at
    /// most 64 bytes keeps the file name earlier versions gave it.
    #[test]
    fn long_object_names_make_file_names_that_fit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let table = WorkloadTable::open(&dir.path().join("w")).expect("open");
        let name = format!("{}.{}", "a".repeat(126), "b".repeat(126));
        let file = WorkloadRecord::file_name(&name, 252, true);
        assert!(
            table
                .marker(&name, 252, true)
                .file_name()
                .is_some_and(|f| f.len() <= 255)
        );
        assert!(file.len() <= 255 - ".tmp".len(), "{}", file.len());
        assert_eq!(file, WorkloadRecord::file_name(&name, 252, true));
        assert_ne!(
            file,
            WorkloadRecord::file_name(&format!("{name}x"), 252, true)
        );
        assert_eq!(WorkloadRecord::parse_file_name(&file), None);
        let record = WorkloadRecord {
            object: name.clone(),
            container: 252,
            hook: true,
            process: ProcessIdentity {
                pid: 42,
                start_time: 7,
                boot_id: "b".into(),
            },
            cgroup: None,
            stop_signal_sent: None,
            sigkill_at: None,
            marks_start: true,
        };
        table.write(&record).expect("write");
        assert_eq!(table.read(&name, 252, true), Some(record.clone()));
        assert_eq!(table.load().expect("load").0, vec![record]);
        table.remove(&name, 252, true).expect("remove");
        assert!(table.load().expect("load").0.is_empty());
        // The names of earlier versions (DNS labels, at most 63 bytes).
        let old = "w".repeat(63);
        assert_eq!(
            WorkloadRecord::file_name(&old, 0, false),
            format!("{}.0.main", "77".repeat(63))
        );
    }
}
