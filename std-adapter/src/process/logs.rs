//! Container log files: what each container writes on its standard output
//! and error, kept in a file of its own under a log directory, bounded in
//! size by rotation.
//!
//! Layout, one directory per object (by name *and* uid, so that a new
//! object under the name of one still being stopped never shares its
//! files), one file per container, rotated copies beside it:
//!
//! ```text
//! <dir>/<name>_<uid>/<container>.log      the file being written
//! <dir>/<name>_<uid>/<container>.log.1    the previous one (older: .2, ..)
//! ```
//!
//! The container's stdout and stderr are that file itself, opened in
//! append mode: no process of ours sits between the workload and its file,
//! so the workload's output is kept (and it never gets SIGPIPE) whatever
//! happens to the agent. Rotation is therefore *copy-truncate*: when a file
//! has grown past [`LogLimits::max_bytes`], it is copied to `.1` (older
//! copies shifted, the oldest dropped) and truncated; the workload's next
//! write lands at its start (append mode). What a container writes between
//! the copy and the truncation is lost, as with logrotate's `copytruncate`,
//! and a file may exceed the bound by what is written between two checks
//! ([`ContainerLogs::rotate`], which the agent calls every
//! [`ROTATE_EVERY`]) — the kubelet's container log rotation is periodic
//! in the same way.
//!
//! A [`ContainerLogs`] (and its clones) keeps the list of the files it
//! opened, and of those an earlier agent left (read from the directory
//! once, at the first rotation or removal): a check looks at each file
//! being written, not at every directory, and the logs of a removed
//! object are found without reading the log directory. Removed objects'
//! directories are deleted in the background ([`super::removal`]).
//!
//! Files are created `0600` in `0700` directories: output is the
//! workload's own business.

use std::collections::BTreeSet;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Bound;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::removal;
use crate::store::StoredObject;

/// The most rotated copies a container keeps ([`LogLimits::max_files`]
/// is at most one more).
pub const MAX_COPIES: u32 = 99;

/// How often a supervisor should call [`ContainerLogs::rotate`].
pub const ROTATE_EVERY: Duration = Duration::from_millis(500);

/// How big container logs may grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogLimits {
    /// A file that has grown past this many bytes is rotated.
    pub max_bytes: u64,
    /// How many files a container keeps: the one being written and
    /// `max_files - 1` rotated copies (at least 2, as the kubelet's
    /// `containerLogMaxFiles`).
    pub max_files: u32,
}

impl Default for LogLimits {
    /// 10 MiB × 2 files.
    fn default() -> Self {
        LogLimits {
            max_bytes: 10 * 1024 * 1024,
            max_files: 2,
        }
    }
}

impl LogLimits {
    /// Checks the limits: `max_bytes` at least 1, `max_files` at least 2;
    /// the error names the field.
    pub fn check(&self) -> Result<(), String> {
        if self.max_bytes == 0 {
            return Err("log max size: must be at least 1 byte".into());
        }
        if self.max_files < 2 || self.max_files > MAX_COPIES.saturating_add(1) {
            return Err(format!(
                "log max files: must be 2 to {} (the file being written and its rotated copies), got {}",
                MAX_COPIES.saturating_add(1),
                self.max_files
            ));
        }
        Ok(())
    }
}

/// The log files of every container under one directory.
#[derive(Clone, Debug)]
pub struct ContainerLogs {
    dir: PathBuf,
    limits: LogLimits,
    /// The files being written, shared by the clones (the actuator opens
    /// them, the rotation thread checks them).
    tracked: Arc<Mutex<Tracked>>,
}

/// The log files known to be written.
#[derive(Debug, Default)]
struct Tracked {
    /// Whether the files already in the directory (an earlier agent's)
    /// were read in.
    scanned: bool,
    /// Each file being written, relative to the log directory
    /// (`<name>_<uid>/<container>.log`); an object directory made before
    /// its file could be opened, as `<name>_<uid>/`. Ordered, so that an
    /// object's entries are together (a path-safe name never holds `_`).
    paths: BTreeSet<Box<str>>,
}

impl Tracked {
    /// The object directories (`<name>_<uid>`) tracked for `name`.
    fn object_dirs(&self, name: &str) -> Vec<String> {
        let prefix = format!("{}_", path_safe(name));
        let mut dirs: Vec<String> = Vec::new();
        for path in self
            .paths
            .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
            .take_while(|p| p.starts_with(&prefix))
        {
            let dir = path.split_once('/').map_or(&**path, |(dir, _)| dir);
            if dirs.last().is_none_or(|last| last != dir) {
                dirs.push(dir.to_owned());
            }
        }
        dirs
    }

    /// Forgets every entry of the object directory `dir`.
    fn forget_dir(&mut self, dir: &str) {
        let prefix = format!("{dir}/");
        let gone: Vec<Box<str>> = self
            .paths
            .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
            .take_while(|p| p.starts_with(&prefix))
            .cloned()
            .collect();
        for path in gone {
            self.paths.remove(&path);
        }
    }
}

/// How many files one step of a rotation checks under the lock.
const ROTATE_CHUNK: usize = 256;

impl ContainerLogs {
    /// Logs under `dir` (created, `0700`, when the first file is opened).
    pub fn new(dir: impl Into<PathBuf>, limits: LogLimits) -> Self {
        ContainerLogs {
            dir: dir.into(),
            limits,
            tracked: Arc::default(),
        }
    }

    /// The tracked files, with those already in the directory read in
    /// first if they were not yet.
    fn tracked(&self) -> MutexGuard<'_, Tracked> {
        let mut tracked = self
            .tracked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !tracked.scanned {
            tracked.scanned = true;
            tracked.paths.extend(scan(&self.dir));
        }
        tracked
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The limits.
    pub fn limits(&self) -> LogLimits {
        self.limits
    }

    /// The directory of one object's logs.
    pub fn object_dir(&self, name: &str, uid: &str) -> PathBuf {
        self.dir
            .join(format!("{}_{}", path_safe(name), path_safe(uid)))
    }

    /// The file container `container` of `object` (stored as `name`)
    /// writes; `None` if it has no such container.
    pub fn file(&self, name: &str, object: &StoredObject, container: usize) -> Option<PathBuf> {
        let c = object.containers.get(container)?;
        let file = if c.name.is_empty() {
            format!("container-{container}.log")
        } else {
            format!("{}.log", path_safe(&c.name))
        };
        Some(self.object_dir(name, object.uid()).join(file))
    }

    /// The files of one container that exist, oldest first (the rotated
    /// copies, then the file being written). Whatever limits they were
    /// written with: a reader need not know the agent's.
    pub fn files(current: &Path) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = (1..=MAX_COPIES)
            .map(|n| rotated(current, n))
            .take_while(|p| p.is_file())
            .collect();
        files.reverse();
        if current.is_file() {
            files.push(current.to_path_buf());
        }
        files
    }

    /// Opens (creating it, and its directories) the file a container's
    /// stdout and stderr go to, in append mode.
    pub fn open(&self, name: &str, object: &StoredObject, container: usize) -> io::Result<File> {
        let path = self
            .file(name, object, container)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such container"))?;
        let object_dir = self.object_dir(name, object.uid());
        let relative = |p: &Path| {
            p.strip_prefix(&self.dir)
                .map(|r| r.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        // Tracked before it exists: a directory made here is removed with
        // its object even if the file cannot be opened.
        let placeholder: Box<str> = format!("{}/", relative(&object_dir)).into();
        let file_entry: Box<str> = relative(&path).into();
        if !self.tracked().paths.contains(&file_entry) {
            self.tracked().paths.insert(placeholder.clone());
        }
        // The same name and uid again, while the old directory still
        // waits to be removed: it goes first.
        removal::settle(&object_dir, removal::Kind::Tree);
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&object_dir)?;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)?;
        let mut tracked = self.tracked();
        tracked.paths.insert(file_entry);
        tracked.paths.remove(&placeholder);
        Ok(file)
    }

    /// Rotates every file being written that has grown past the limit: the
    /// files opened through this value (or a clone), and those found in
    /// the directory at the first call. Errors on one file do not stop the
    /// others; the first is returned.
    pub fn rotate(&self) -> io::Result<()> {
        // A chunk at a time, the lock taken for each: opening a workload's
        // file never waits for a whole pass.
        let mut first = None;
        let mut after: Option<Box<str>> = None;
        loop {
            let chunk: Vec<Box<str>> = {
                let tracked = self.tracked();
                let from = match &after {
                    Some(last) => Bound::Excluded(&**last),
                    None => Bound::Unbounded,
                };
                tracked
                    .paths
                    .range::<str, _>((from, Bound::Unbounded))
                    .take(ROTATE_CHUNK)
                    .cloned()
                    .collect()
            };
            let Some(last) = chunk.last().cloned() else {
                break;
            };
            for relative in chunk.iter().filter(|p| !p.ends_with('/')) {
                match self.rotate_file(&self.dir.join(&**relative)) {
                    Ok(()) => {}
                    // Removed with its object meanwhile.
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => {
                        first.get_or_insert(e);
                    }
                }
            }
            after = Some(last);
        }
        first.map_or(Ok(()), Err)
    }

    /// Copy-truncate of one file, if it is past the limit.
    fn rotate_file(&self, path: &Path) -> io::Result<()> {
        if std::fs::metadata(path)?.len() <= self.limits.max_bytes {
            return Ok(());
        }
        // Shift the copies: .(n-2) → .(n-1), .., .1 → .2; the oldest goes.
        for n in (1..self.limits.max_files.saturating_sub(1)).rev() {
            let from = rotated(path, n);
            if from.exists() {
                std::fs::rename(&from, rotated(path, n.saturating_add(1)))?;
            }
        }
        let copy = rotated(path, 1);
        let _ = std::fs::remove_file(&copy);
        let mut out = OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(0o600)
            .open(&copy)?;
        let mut current = OpenOptions::new().read(true).write(true).open(path)?;
        io::copy(&mut current, &mut out)?;
        // The workload appends: its next write lands at offset 0.
        current.set_len(0)
    }

    /// Removes the logs of the object stored as `name`, except those of
    /// the object with uid `keep` (one that holds the name now).
    pub fn remove_object(&self, name: &str, keep: Option<&str>) {
        self.remove_objects([(name, keep)]);
    }

    /// [`remove_object`](Self::remove_object) for many objects. Their
    /// directories are found among those tracked (no reading of the log
    /// directory, which holds one per object) and deleted in the
    /// background ([`removal`]).
    pub fn remove_objects<'a>(
        &self,
        removed: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) {
        let mut removed = removed.into_iter().peekable();
        if removed.peek().is_none() {
            return;
        }
        let mut tracked = self.tracked();
        for (name, keep) in removed {
            let kept = keep.map(|uid| dir_name(&self.object_dir(name, uid)));
            for dir in tracked.object_dirs(name) {
                if kept.as_ref() == Some(&dir) {
                    continue;
                }
                tracked.forget_dir(&dir);
                removal::remove(self.dir.join(dir), removal::Kind::Tree);
            }
        }
    }

    /// Removes the logs of every object for which `stored(name, uid)` is
    /// false (records removed while no agent was there to see it).
    pub fn remove_unless(&self, stored: impl Fn(&str, &str) -> bool) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some((name, uid)) = name.to_str().and_then(|n| n.split_once('_')) else {
                continue;
            };
            let (Some(name), Some(uid)) = (path_unsafe(name), path_unsafe(uid)) else {
                continue;
            };
            if !stored(&name, &uid) {
                let _ = std::fs::remove_dir_all(entry.path());
                if let Some(dir) = entry.file_name().to_str() {
                    self.tracked().forget_dir(dir);
                }
            }
        }
    }
}

/// The name of an object directory (`<name>_<uid>`), as it is tracked.
fn dir_name(object_dir: &Path) -> String {
    object_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The log files being written in `dir` (`*.log` in each object
/// directory), relative to it.
fn scan(dir: &Path) -> Vec<Box<str>> {
    let Ok(objects) = std::fs::read_dir(dir) else {
        return Vec::new(); // nothing logged yet
    };
    let mut found = Vec::new();
    for object in objects.flatten() {
        let Some(name) = object.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if !name.contains('_') {
            continue;
        }
        let before = found.len();
        if let Ok(files) = std::fs::read_dir(object.path()) {
            for file in files.flatten() {
                let file = file.file_name();
                let Some(file) = file.to_str() else { continue };
                if file.ends_with(".log") {
                    found.push(format!("{name}/{file}").into());
                }
            }
        }
        if found.len() == before {
            // No file: the directory alone, to be removed with its object.
            found.push(format!("{name}/").into());
        }
    }
    found
}

/// Follows one container's log file as it grows and is rotated: each
/// [`read_new`](LogFollower::read_new) returns what was written since the
/// last. The file is kept open, so a follower reads to the end even once
/// the record and its logs are removed.
///
/// A rotation is told by the first rotated copy changing (a new copy is a
/// new file) or by the file being shorter than what was read: the rest of
/// what was read is then in that copy, and the file is read from its start.
#[derive(Debug)]
pub struct LogFollower {
    file: File,
    current: PathBuf,
    offset: u64,
    copy: Option<CopyId>,
}

/// What tells one rotated copy from the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CopyId {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
}

fn copy_id(path: &Path) -> Option<CopyId> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(CopyId {
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        mtime: (m.mtime(), m.mtime_nsec()),
    })
}

impl LogFollower {
    /// Opens the file being written, `current`, to follow it from its
    /// start.
    pub fn open(current: &Path) -> io::Result<Self> {
        let copy = copy_id(&rotated(current, 1));
        Ok(LogFollower {
            file: File::open(current)?,
            current: current.to_path_buf(),
            offset: 0,
            copy,
        })
    }

    /// What was written since the last call (the first: the whole file).
    pub fn read_new(&mut self) -> io::Result<Vec<u8>> {
        let mut text = Vec::new();
        let len = self.file.metadata()?.len();
        let copy = copy_id(&rotated(&self.current, 1));
        let from = if copy != self.copy || len < self.offset {
            if let Ok(mut old) = File::open(rotated(&self.current, 1)) {
                let _ = old.seek(SeekFrom::Start(self.offset))?;
                let _ = old.read_to_end(&mut text)?;
            }
            0
        } else {
            self.offset
        };
        let _ = self.file.seek(SeekFrom::Start(from))?;
        let read = self.file.read_to_end(&mut text)?;
        self.offset = from.saturating_add(read as u64);
        self.copy = copy;
        Ok(text)
    }
}

/// The `n`th rotated copy of `current`: `<current>.<n>`.
fn rotated(current: &Path, n: u32) -> PathBuf {
    let mut name = current.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// `s` as one path component: ASCII letters, digits, `-` and `.` as they
/// are (a leading `.` escaped), everything else `%XX` per byte; never
/// `_`, which separates name and uid.
fn path_safe(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for (i, b) in s.bytes().enumerate() {
        let plain = b.is_ascii_alphanumeric() || b == b'-' || (b == b'.' && i > 0);
        if plain {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() {
        out.push('%');
    }
    out
}

/// The inverse of [`path_safe`]; `None` if `s` is not one of its outputs.
fn path_unsafe(s: &str) -> Option<String> {
    if s == "%" {
        return Some(String::new());
    }
    let mut bytes = Vec::with_capacity(s.len());
    let mut rest = s.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        if b == b'%' {
            let hex = tail.get(..2)?;
            let hex = std::str::from_utf8(hex).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = tail.get(2..)?;
        } else {
            bytes.push(b);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use grace_core::{Name, Record};

    fn object(uid: &str) -> StoredObject {
        let mut object =
            StoredObject::unscheduled(Record::new(Name::try_from(uid).expect("short")));
        object.containers = vec![crate::store::StoredContainer {
            name: "app".into(),
            ..Default::default()
        }];
        object
    }

    fn append(file: &mut File, text: &str) {
        use std::io::Write;
        file.write_all(text.as_bytes()).expect("written");
    }

    #[test]
    fn rotation_copies_truncates_and_keeps_max_files() {
        let dir = tempfile::tempdir().expect("temp dir");
        let logs = ContainerLogs::new(
            dir.path(),
            LogLimits {
                max_bytes: 4,
                max_files: 3,
            },
        );
        let web = object("u1");
        let mut file = logs.open("web", &web, 0).expect("opened");
        let current = logs.file("web", &web, 0).expect("a container");
        append(&mut file, "one\n");
        logs.rotate().expect("rotated");
        assert_eq!(
            ContainerLogs::files(&current),
            std::slice::from_ref(&current),
            "within the bound"
        );
        for text in ["two\n2\n", "three\n", "four\n4\n"] {
            append(&mut file, text);
            logs.rotate().expect("rotated");
        }
        // The writer appends: after each truncation it starts again at 0.
        append(&mut file, "five\n");
        let files = ContainerLogs::files(&current);
        assert_eq!(files.len(), 3, "{files:?}");
        let read: Vec<String> = files
            .iter()
            .map(|f| std::fs::read_to_string(f).expect("read"))
            .collect();
        assert_eq!(read, ["three\n", "four\n4\n", "five\n"]);
    }

    #[test]
    fn a_follower_reads_across_rotations_without_loss_or_repeat() {
        let dir = tempfile::tempdir().expect("temp dir");
        let logs = ContainerLogs::new(
            dir.path(),
            LogLimits {
                max_bytes: 8,
                max_files: 2,
            },
        );
        let web = object("u1");
        let mut writer = logs.open("web", &web, 0).expect("opened");
        let current = logs.file("web", &web, 0).expect("a container");
        let mut follower = LogFollower::open(&current).expect("open");
        append(&mut writer, "a\n");
        assert_eq!(follower.read_new().expect("read"), b"a\n");
        assert_eq!(follower.read_new().expect("read"), b"", "nothing new");
        // The file is rotated and grows past what was read: the rest comes
        // from the copy, then the file from its start.
        append(&mut writer, "bbbbbbbbb\n");
        logs.rotate().expect("rotated");
        append(&mut writer, "c\n");
        assert_eq!(follower.read_new().expect("read"), b"bbbbbbbbb\nc\n");
        // Rotated twice more, read in between.
        append(&mut writer, "dddddddd\n");
        logs.rotate().expect("rotated");
        assert_eq!(follower.read_new().expect("read"), b"dddddddd\n");
        append(&mut writer, "e\n");
        assert_eq!(follower.read_new().expect("read"), b"e\n");
    }

    #[test]
    fn removal_takes_one_objects_logs_and_spares_the_current_uid() {
        let dir = tempfile::tempdir().expect("temp dir");
        let logs = ContainerLogs::new(dir.path(), LogLimits::default());
        for (name, uid) in [("web", "old"), ("web", "new"), ("web-2", "u"), ("api", "u")] {
            let _ = logs.open(name, &object(uid), 0).expect("opened");
        }
        logs.remove_object("web", Some("new"));
        removal::flush();
        assert!(!logs.object_dir("web", "old").exists());
        assert!(logs.object_dir("web", "new").exists());
        assert!(
            logs.object_dir("web-2", "u").exists(),
            "another name, untouched"
        );
        logs.remove_unless(|name, _| name == "api");
        assert!(logs.object_dir("api", "u").exists());
        assert!(!logs.object_dir("web", "new").exists());
        assert!(!logs.object_dir("web-2", "u").exists());
    }

    #[test]
    fn rotation_checks_the_files_opened_since_and_those_an_earlier_agent_left() {
        let dir = tempfile::tempdir().expect("temp dir");
        let limits = LogLimits {
            max_bytes: 4,
            max_files: 2,
        };
        // An earlier agent's file, written after it stopped checking.
        let earlier = ContainerLogs::new(dir.path(), limits);
        let old = object("u-old");
        let mut old_writer = earlier.open("old", &old, 0).expect("opened");
        append(&mut old_writer, "earlier agent\n");
        drop(earlier);

        let logs = ContainerLogs::new(dir.path(), limits);
        logs.rotate().expect("rotated");
        let old_file = logs.file("old", &old, 0).expect("a container");
        assert_eq!(
            ContainerLogs::files(&old_file).len(),
            2,
            "found and rotated"
        );
        // A file opened after the first check (no directory scan since),
        // through a clone, as the actuator opens them.
        let opener = logs.clone();
        let new = object("u-new");
        let mut writer = opener.open("new", &new, 0).expect("opened");
        let new_file = logs.file("new", &new, 0).expect("a container");
        append(&mut writer, "written after\n");
        logs.rotate().expect("rotated");
        assert_eq!(ContainerLogs::files(&new_file).len(), 2, "rotated too");
        assert_eq!(
            std::fs::metadata(&new_file).expect("stat").len(),
            0,
            "truncated"
        );
        // A removed object's files are no longer checked (and gone).
        logs.remove_object("new", None);
        removal::flush();
        assert!(!logs.object_dir("new", "u-new").exists());
        append(&mut writer, "after its removal\n");
        logs.rotate().expect("a removed file is no error");
        assert!(logs.object_dir("old", "u-old").exists(), "untouched");
    }

    #[test]
    fn path_safe_round_trips_and_never_holds_a_separator() {
        for s in ["web", "a_b", "../x", ".hidden", "uid-1", "é/ü", "", "%"] {
            let safe = path_safe(s);
            assert!(!safe.contains('_') && !safe.contains('/'), "{s} → {safe}");
            assert!(!safe.starts_with('.'), "{s} → {safe}");
            assert_eq!(path_unsafe(&safe).as_deref(), Some(s), "{s} → {safe}");
        }
    }
}
