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
//! <dir>/<name>_<uid>/<container>_previous.log  the run before a restart
//! ```
//!
//! Each line is kept as a record with the time the agent read it, in the
//! kubelet's CRI log format ([`cri`]: `TIME stdout F TEXT`); readers
//! decode the records ([`cri::Decoder`]), and files of earlier versions
//! (plain output) read as they are.
//!
//! When a container is started again (R92), its files become those of
//! its previous run (`_previous`, rotated copies included; the run before
//! that is dropped), as the kubelet keeps one previous instance:
//! `grace logs --previous` reads them.
//!
//! The container's stdout and stderr are a pipe (a FIFO beside the log,
//! `<container>.pipe`) that the agent reads: one thread for every
//! container (an epoll loop) writes what it reads into the log
//! file and rotates it by rename when it is full (older copies shifted,
//! the oldest dropped). The agent owns the write path, so no file ever
//! exceeds [`LogLimits::max_bytes`] and a container keeps at most
//! `max_bytes × max_files` bytes, at any write rate: a container that
//! writes faster than its log is written waits on its full pipe, as a
//! process writing to a slow terminal does. Bytes that cannot be written
//! (the disk is full, a rotation fails) are dropped, counted, and marked in
//! the log (`[grace: 123456 bytes dropped]`); the marker counts within the
//! bound.
//!
//! Workloads outlive the agent: each workload also holds a read end of its
//! own pipe (inherited, never read), so that it never gets SIGPIPE while
//! no agent runs; it waits once its pipe (64 KiB) is full, until the next
//! agent opens the FIFO again by its path ([`ContainerLogs::adopt`]) and
//! reads on.
//!
//! A [`ContainerLogs`] (and its clones) keeps the list of the files it
//! opened, and of those an earlier agent left (read from the directory
//! once, at the first adoption or removal): the logs of a removed object
//! are found without reading the log directory. Removed objects'
//! directories are deleted in the background (see
//! [`flush_removals`](super::flush_removals)).
//!
//! Files are created `0600` in `0700` directories: output is the
//! workload's own business.

use std::collections::BTreeSet;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Bound;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use super::{file_name, removal};
use crate::store::StoredObject;

pub mod cri;
mod pump;

/// The most rotated copies a container keeps ([`LogLimits::max_files`]
/// is at most one more).
pub const MAX_COPIES: u32 = 99;

/// What a container's stdout and stderr are: the write end of its pipe,
/// and a read end the workload holds too ([`ContainerLogs::open`]).
#[derive(Debug)]
pub struct ContainerOutput {
    /// The write end: the workload's stdout and stderr.
    pub writer: File,
    /// A read end the workload inherits (it is not close-on-exec) and never
    /// reads, so that its writes never fail with SIGPIPE while no agent
    /// reads the pipe. Close it once the workload is started: until then,
    /// any process started by this one inherits it.
    pub keeper: OwnedFd,
}

/// How big container logs may grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogLimits {
    /// The most bytes one file holds: a write that would pass it goes on
    /// in a new file (the full one rotated).
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
    /// Checks the limits: `max_bytes` at least 1, `max_files` 2 to
    /// [`MAX_COPIES`] + 1; the error names the field.
    pub fn check(&self) -> Result<(), LogLimitsError> {
        if self.max_bytes == 0 {
            return Err(LogLimitsError::MaxBytes);
        }
        if self.max_files < 2 || self.max_files > MAX_COPIES.saturating_add(1) {
            return Err(LogLimitsError::MaxFiles {
                got: self.max_files,
            });
        }
        Ok(())
    }
}

/// Limits [`LogLimits::check`] refuses.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogLimitsError {
    /// `max_bytes` is 0.
    MaxBytes,
    /// `max_files` is less than 2 or more than [`MAX_COPIES`] + 1.
    MaxFiles {
        /// The value given.
        got: u32,
    },
}

impl std::fmt::Display for LogLimitsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LogLimitsError::MaxBytes => write!(f, "log max size: must be at least 1 byte"),
            LogLimitsError::MaxFiles { got } => write!(
                f,
                "log max files: must be 2 to {} (the file being written and its rotated copies), got {got}",
                MAX_COPIES.saturating_add(1)
            ),
        }
    }
}

impl std::error::Error for LogLimitsError {}

/// The log files of every container under one directory.
#[derive(Clone, Debug)]
pub struct ContainerLogs {
    dir: PathBuf,
    limits: LogLimits,
    /// The files being written, shared by the clones (the actuator opens
    /// them, removal forgets them).
    tracked: Arc<Mutex<Tracked>>,
    /// The pump, started at the first open or adoption.
    pump: Arc<Mutex<Option<Arc<pump::Pump>>>>,
}

/// The log files known to be written.
#[derive(Debug, Default)]
struct Tracked {
    /// Whether the files already in the directory (an earlier agent's)
    /// were read in.
    scanned: bool,
    /// Whether a pipe was opened or adopted: adoption is for the pipes of
    /// an earlier agent, before any of this one.
    piped: bool,
    /// Each file being written, relative to the log directory
    /// (`<name>_<uid>/<container>.log`); an object directory made before
    /// its file could be opened, as `<name>_<uid>/`. Ordered, so that an
    /// object's entries are together (a path-safe name never holds `_`).
    paths: BTreeSet<Box<str>>,
}

impl Tracked {
    /// The object directories (`<name>_<uid>`) tracked for `name`.
    fn object_dirs(&self, name: &str) -> Vec<String> {
        let prefix = format!("{}_", name_part(name));
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

impl ContainerLogs {
    /// Logs under `dir` (created, `0700`, when the first file is opened).
    pub fn new(dir: impl Into<PathBuf>, limits: LogLimits) -> Self {
        ContainerLogs {
            dir: dir.into(),
            limits,
            tracked: Arc::default(),
            pump: Arc::default(),
        }
    }

    /// The pump, started if it was not.
    fn pump(&self) -> io::Result<Arc<pump::Pump>> {
        let mut pump = self.pump.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(pump) = &*pump {
            return Ok(Arc::clone(pump));
        }
        let started = pump::Pump::start()?;
        *pump = Some(Arc::clone(&started));
        Ok(started)
    }

    /// The tracked files, with those already in the directory read in
    /// first if they were not yet.
    fn tracked(&self) -> MutexGuard<'_, Tracked> {
        let mut tracked = self.tracked.lock().unwrap_or_else(PoisonError::into_inner);
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
        self.dir.join(object_dir_name(name, uid))
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

    /// The file container `container` of `object` wrote in its run before
    /// its last restart ([`keep_previous`](Self::keep_previous)).
    pub fn previous_file(
        &self,
        name: &str,
        object: &StoredObject,
        container: usize,
    ) -> Option<PathBuf> {
        let current = self.file(name, object, container)?;
        let stem = current.file_stem()?.to_string_lossy().into_owned();
        // `_` never occurs in a container's file name: no clash.
        Some(current.with_file_name(format!("{stem}_previous.log")))
    }

    /// Before container `container` of `object` starts again: its files
    /// (the one being written and its rotated copies) become its previous
    /// run's, replacing those of the run before.
    pub fn keep_previous(
        &self,
        name: &str,
        object: &StoredObject,
        container: usize,
    ) -> io::Result<()> {
        let (Some(current), Some(previous)) = (
            self.file(name, object, container),
            self.previous_file(name, object, container),
        ) else {
            return Ok(());
        };
        for old in Self::files(&previous) {
            std::fs::remove_file(old)?;
        }
        for n in (1..=MAX_COPIES).take_while(|&n| rotated(&current, n).is_file()) {
            std::fs::rename(rotated(&current, n), rotated(&previous, n))?;
        }
        match std::fs::rename(&current, &previous) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
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

    /// Opens the output of container `container` of `object` (stored as
    /// `name`): creates its directories, its log file (empty, if it was
    /// not there) and a new pipe (a FIFO beside the log), which the pump
    /// reads into the log from now on. The workload's stdout and stderr are
    /// the returned [`ContainerOutput::writer`].
    pub fn open(
        &self,
        name: &str,
        object: &StoredObject,
        container: usize,
    ) -> io::Result<ContainerOutput> {
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
        drop(
            OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&path)?,
        );
        let fifo = fifo_of(&path);
        // A pipe of an earlier run of the container: a new one.
        match std::fs::remove_file(&fifo) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, Mode::RUSR | Mode::WUSR)?;
        let reader = rustix::fs::open(
            &fifo,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        // Opened after a reader, so at once; blocking for the workload.
        let writer = OpenOptions::new().write(true).open(&fifo)?;
        let keeper = rustix::fs::open(&fifo, OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty())?;
        self.pump()?
            .add(pump::Sink::new(reader, path, self.limits))?;
        let mut tracked = self.tracked();
        tracked.piped = true;
        tracked.paths.insert(file_entry);
        tracked.paths.remove(&placeholder);
        Ok(ContainerOutput { writer, keeper })
    }

    /// Takes over the pipes an earlier agent's workloads still write
    /// (`<container>.pipe` beside each log): the pump reads them on into
    /// their logs. A pipe no workload writes any more is removed. Returns
    /// how many were taken over. Only the first call, before any
    /// [`open`](Self::open), does anything.
    pub fn adopt(&self) -> io::Result<usize> {
        let mut tracked = self.tracked();
        if std::mem::replace(&mut tracked.piped, true) {
            return Ok(0);
        }
        let files: Vec<PathBuf> = tracked
            .paths
            .iter()
            .filter(|p| !p.ends_with('/'))
            .map(|p| self.dir.join(&**p))
            .collect();
        drop(tracked);
        let mut adopted = 0_usize;
        for log in files {
            let fifo = fifo_of(&log);
            let reader = match rustix::fs::open(
                &fifo,
                OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
                Mode::empty(),
            ) {
                Ok(reader) => reader,
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(e.into()),
            };
            let mut sink = pump::Sink::new(reader, log, self.limits);
            // What it holds now (a turn's worth: the pump reads the rest);
            // end of file if no writer is left (the workload is gone).
            let mut buf = vec![0_u8; 64 * 1024];
            let alive = matches!(sink.pump(&mut buf), pump::Flow::Open);
            if alive {
                self.pump()?.add(sink)?;
                adopted = adopted.saturating_add(1);
            } else {
                let _ = std::fs::remove_file(&fifo);
            }
        }
        Ok(adopted)
    }

    /// Removes the logs of the object stored as `name`, except those of
    /// the object with uid `keep` (one that holds the name now).
    pub fn remove_object(&self, name: &str, keep: Option<&str>) {
        self.remove_objects([(name, keep)]);
    }

    /// [`remove_object`](Self::remove_object) for many objects. Their
    /// directories are found among those tracked (no reading of the log
    /// directory, which holds one per object) and deleted in the
    /// background ([`flush_removals`](super::flush_removals) waits for it).
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

    /// Removes the logs of every object but those `stored` (`(name,
    /// uid)` pairs): records removed while no agent was there to see it.
    pub fn retain<'a>(&self, stored: impl IntoIterator<Item = (&'a str, &'a str)>) {
        let kept: std::collections::HashSet<String> = stored
            .into_iter()
            .map(|(name, uid)| object_dir_name(name, uid))
            .collect();
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let Some(dir) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            // Object directories only: `<name>_<uid>`.
            if !dir.contains('_') || kept.contains(&dir) {
                continue;
            }
            let _ = std::fs::remove_dir_all(entry.path());
            self.tracked().forget_dir(&dir);
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
/// Rotation is by rename: the file held open becomes `.1`. A follower
/// reads it to its end, then the copies newer than it (if it was rotated
/// more than once since), then the new file from its start.
#[derive(Debug)]
pub struct LogFollower {
    file: File,
    current: PathBuf,
    offset: u64,
}

/// The device and inode of a file.
fn identity(m: &std::fs::Metadata) -> (u64, u64) {
    (m.dev(), m.ino())
}

impl LogFollower {
    /// Opens the file being written, `current`, to follow it from its
    /// start.
    pub fn open(current: &Path) -> io::Result<Self> {
        Ok(LogFollower {
            file: File::open(current)?,
            current: current.to_path_buf(),
            offset: 0,
        })
    }

    /// What was written since the last call (the first: the whole file).
    pub fn read_new(&mut self) -> io::Result<Vec<u8>> {
        let mut text = Vec::new();
        let _ = self.file.seek(SeekFrom::Start(self.offset))?;
        let read = self.file.read_to_end(&mut text)?;
        self.offset = self.offset.saturating_add(read as u64);
        let ours = identity(&self.file.metadata()?);
        if std::fs::metadata(&self.current).is_ok_and(|m| identity(&m) == ours) {
            return Ok(text);
        }
        // Rotated: ours is a copy now (or gone). The newer copies, oldest
        // first, then the new file.
        let copies: Vec<PathBuf> = (1..=MAX_COPIES)
            .map(|n| rotated(&self.current, n))
            .take_while(|p| p.exists())
            .collect();
        let at = copies
            .iter()
            .position(|p| std::fs::metadata(p).is_ok_and(|m| identity(&m) == ours));
        let newer = copies.get(..at.unwrap_or(copies.len())).unwrap_or_default();
        let mut next: Option<(File, u64)> = None;
        for copy in newer.iter().rev().map(Some).chain([None]) {
            let Ok(mut file) = File::open(copy.map_or(self.current.as_path(), PathBuf::as_path))
            else {
                continue;
            };
            let read = file.read_to_end(&mut text)?;
            next = Some((file, read as u64));
        }
        if let Some((file, offset)) = next {
            self.file = file;
            self.offset = offset;
        }
        Ok(text)
    }
}

/// The pipe beside the log file `log`: `<container>.pipe`.
fn fifo_of(log: &Path) -> PathBuf {
    log.with_extension("pipe")
}

/// The `n`th rotated copy of `current`: `<current>.<n>`.
fn rotated(current: &Path, n: u32) -> PathBuf {
    let mut name = current.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// The longest name part of an object directory's name: a name of up to
/// 160 path-safe bytes is whole (every name of the versions that allowed
/// at most 63 bytes), a longer one cut ([`file_name::fit`]).
const NAME_PART_MAX: usize = 160;

/// The longest uid part: a UUID is whole.
const UID_PART_MAX: usize = 80;

/// The name of an object's log directory: `<name>_<uid>`, each path-safe
/// and cut to fit, so that the whole is a path component (at most 241
/// bytes).
fn object_dir_name(name: &str, uid: &str) -> String {
    format!(
        "{}_{}",
        name_part(name),
        file_name::fit(path_safe(uid), UID_PART_MAX)
    )
}

/// The name part of an object's log directory's name.
fn name_part(name: &str) -> String {
    file_name::fit(path_safe(name), NAME_PART_MAX)
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

/// The last `n` lines of `text` (a last line without its newline counts):
/// `--tail N` of `grace logs` and `tailLines` of the Kubernetes API.
pub fn last_lines(text: &[u8], n: usize) -> &[u8] {
    if n == 0 {
        return &[];
    }
    let body = text.strip_suffix(b"\n").unwrap_or(text);
    let mut seen = 0_usize;
    for (i, &b) in body.iter().enumerate().rev() {
        if b == b'\n' {
            seen = seen.saturating_add(1);
            if seen == n {
                return text.get(i.saturating_add(1)..).unwrap_or(&[]);
            }
        }
    }
    text
}

/// The inverse of [`path_safe`]; `None` if `s` is not one of its outputs
/// (a test that the escape loses nothing).
#[cfg(test)]
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

    /// Limits out of range are refused with which one and why.
    #[test]
    fn log_limits_out_of_range_are_refused_naming_the_limit() {
        let limits = |max_bytes, max_files| LogLimits {
            max_bytes,
            max_files,
        };
        assert_eq!(limits(1, 2).check(), Ok(()));
        assert_eq!(limits(0, 2).check(), Err(LogLimitsError::MaxBytes));
        assert_eq!(
            limits(1, 1).check(),
            Err(LogLimitsError::MaxFiles { got: 1 })
        );
        let too_many = limits(1, MAX_COPIES + 2).check().expect_err("too many");
        assert!(
            too_many
                .to_string()
                .starts_with("log max files: must be 2 to 100")
        );
    }
    use grace_core::{Name, Record};

    fn object(uid: &str) -> StoredObject {
        let mut object =
            StoredObject::unscheduled(Record::new(Name::try_from(uid).expect("short")));
        object.containers = vec![crate::store::StoredContainer::named("app")];
        object
    }

    fn append(file: &mut File, text: &str) {
        use std::io::Write;
        file.write_all(text.as_bytes()).expect("written");
    }

    /// Waits (10 s at most) until `done` holds.
    fn wait_until(what: &str, done: impl Fn() -> bool) {
        let start = std::time::Instant::now();
        while !done() {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(10),
                "{what}: not in 10 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap_or_default()
    }

    /// The output the files hold, records decoded.
    fn decoded(files: &[PathBuf]) -> String {
        let mut decoder = cri::Decoder::new();
        let mut lines = Vec::new();
        for file in files {
            lines.extend(decoder.feed(&std::fs::read(file).unwrap_or_default()));
        }
        lines.extend(decoder.finish());
        lines
            .iter()
            .map(|l| String::from_utf8_lossy(&l.text).into_owned())
            .collect()
    }

    /// A record is the line and 40 bytes of time, stream and tag.
    const RECORD: u64 = 40;

    #[test]
    fn rotation_by_rename_keeps_max_files_of_at_most_max_bytes_and_records_whole() {
        let dir = tempfile::tempdir().expect("temp dir");
        let logs = ContainerLogs::new(
            dir.path(),
            LogLimits {
                max_bytes: 2 * RECORD + 10,
                max_files: 3,
            },
        );
        let web = object("u1");
        let mut output = logs.open("web", &web, 0).expect("opened");
        let current = logs.file("web", &web, 0).expect("a container");
        append(&mut output.writer, "one\n");
        wait_until("written", || {
            decoded(std::slice::from_ref(&current)) == "one\n"
        });
        assert_eq!(
            ContainerLogs::files(&current),
            std::slice::from_ref(&current),
            "within the bound"
        );
        for text in ["two\n2\n", "three\n", "four\n4\n", "five\n"] {
            append(&mut output.writer, text);
        }
        wait_until("all written", || {
            decoded(&ContainerLogs::files(&current)).ends_with("five\n")
        });
        let files = ContainerLogs::files(&current);
        assert_eq!(files.len(), 3, "{files:?}");
        for file in &files {
            let len = std::fs::metadata(file).expect("stat").len();
            assert!(len <= 2 * RECORD + 10, "{file:?}: {len}");
        }
        // Two records a file, never cut: the oldest went whole.
        assert_eq!(decoded(&files), "2\nthree\nfour\n4\nfive\n");
    }

    #[test]
    fn bytes_that_cannot_be_written_are_counted_and_marked() {
        let dir = tempfile::tempdir().expect("temp dir");
        let current = dir.path().join("app.log");
        let pipe = rustix::fs::open("/dev/null", OFlags::RDONLY, Mode::empty()).expect("a fd");
        let mut sink = pump::Sink::new(
            pipe,
            current.clone(),
            LogLimits {
                max_bytes: RECORD + 32,
                max_files: 2,
            },
        );
        sink.append(b"0123456789012345678901234567890\n");
        let full = read(&current);
        assert_eq!(full.len() as u64, RECORD + 32);
        // The rotation cannot rename the full file: a directory is there.
        let copy = rotated(&current, 1);
        std::fs::create_dir_all(copy.join("in-the-way")).expect("made");
        sink.append(b"lost\n");
        sink.append(b"gone\n");
        assert_eq!(read(&current), full, "nothing more written");
        std::fs::remove_dir_all(&copy).expect("removed");
        sink.append(b"kept\n");
        let all = decoded(&ContainerLogs::files(&current));
        assert!(
            all.ends_with("[grace: 10 bytes dropped]\nkept\n"),
            "two lines of 5 bytes: {all}"
        );
        for file in ContainerLogs::files(&current) {
            assert!(std::fs::metadata(&file).expect("stat").len() <= RECORD + 32);
        }
    }

    #[test]
    fn a_follower_reads_across_rotations_without_loss_or_repeat() {
        let dir = tempfile::tempdir().expect("temp dir");
        let logs = ContainerLogs::new(
            dir.path(),
            LogLimits {
                max_bytes: RECORD + 8,
                max_files: 3,
            },
        );
        let web = object("u1");
        let mut output = logs.open("web", &web, 0).expect("opened");
        let current = logs.file("web", &web, 0).expect("a container");
        let mut follower = LogFollower::open(&current).expect("open");
        let mut decoder = cri::Decoder::new();
        let mut written = String::new();
        let mut followed = String::new();
        // Each text ends a line: once the files end with it, it is all in.
        for text in ["a\n", "bbbbbbbbb\n", "cccccccccccc\n", "d\n"] {
            append(&mut output.writer, text);
            written.push_str(text);
            wait_until("written", || {
                decoded(&ContainerLogs::files(&current)).ends_with(text)
            });
            for line in decoder.feed(&follower.read_new().expect("read")) {
                followed.push_str(&String::from_utf8_lossy(&line.text));
            }
            assert_eq!(follower.read_new().expect("read"), b"", "nothing new");
        }
        // The third text was rotated twice between two reads.
        assert_eq!(followed, written);
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
        logs.retain([("api", "u")]);
        assert!(logs.object_dir("api", "u").exists());
        assert!(!logs.object_dir("web", "new").exists());
        assert!(!logs.object_dir("web-2", "u").exists());
    }

    /// A 253-byte name (a Kubernetes pod name) gets a log directory whose
    /// name fits a path component, found, kept and removed by its name; a
    /// name of earlier versions (at most 63 bytes) keeps its directory.
    #[test]
    fn long_names_get_log_directories_that_fit() {
        let dir = tempfile::tempdir().expect("temp dir");
        let logs = ContainerLogs::new(dir.path(), LogLimits::default());
        let long = format!("{}.{}", "a".repeat(126), "b".repeat(126));
        let longer = format!("{}.{}", "a".repeat(126), "c".repeat(126));
        for name in [long.as_str(), longer.as_str()] {
            let _ = logs.open(name, &object("u"), 0).expect("opened");
        }
        let long_dir = logs.object_dir(&long, "u");
        assert!(long_dir.exists());
        assert_ne!(long_dir, logs.object_dir(&longer, "u"));
        assert!(dir_name(&long_dir).len() <= 255);
        assert_eq!(
            dir_name(&logs.object_dir(&"w".repeat(63), "u")),
            format!("{}_u", "w".repeat(63))
        );
        logs.retain([(long.as_str(), "u")]);
        assert!(long_dir.exists());
        assert!(!logs.object_dir(&longer, "u").exists());
        logs.remove_object(&long, None);
        removal::flush();
        assert!(!long_dir.exists());
    }

    #[test]
    fn adoption_reads_an_earlier_agents_live_pipes_and_removes_dead_ones() {
        let dir = tempfile::tempdir().expect("temp dir");
        let limits = LogLimits {
            max_bytes: 256,
            max_files: 2,
        };
        // An earlier agent's pipes, as its workloads left them: one still
        // written (its writer open), one whose writer is gone.
        let live = object("u-live");
        let dead = object("u-dead");
        let earlier = ContainerLogs::new(dir.path(), limits);
        let live_file = earlier.file("live", &live, 0).expect("a container");
        let dead_file = earlier.file("dead", &dead, 0).expect("a container");
        let mut writer = None;
        for file in [&live_file, &dead_file] {
            std::fs::create_dir_all(file.parent().expect("dir")).expect("made");
            std::fs::write(file, "before\n").expect("written");
            rustix::fs::mkfifoat(rustix::fs::CWD, fifo_of(file), Mode::RUSR | Mode::WUSR)
                .expect("fifo");
        }
        let keeper = rustix::fs::open(
            fifo_of(&live_file),
            OFlags::RDONLY | OFlags::NONBLOCK,
            Mode::empty(),
        )
        .expect("keeper");
        let mut w = OpenOptions::new()
            .write(true)
            .open(fifo_of(&live_file))
            .expect("writer");
        append(&mut w, "while no agent ran\n");
        writer.replace(w);

        let logs = ContainerLogs::new(dir.path(), limits);
        assert_eq!(logs.adopt().expect("adopted"), 1);
        assert_eq!(logs.adopt().expect("once"), 0, "only once");
        // The earlier agent's line (no record: an older format) reads on.
        assert_eq!(
            decoded(std::slice::from_ref(&live_file)),
            "before\nwhile no agent ran\n"
        );
        append(writer.as_mut().expect("writer"), "after\n");
        wait_until("pumped", || {
            decoded(std::slice::from_ref(&live_file)).ends_with("after\n")
        });
        assert!(!fifo_of(&dead_file).exists(), "a dead pipe goes");
        assert_eq!(read(&dead_file), "before\n");
        // The writer goes: so does its pipe.
        drop(writer);
        drop(keeper);
        wait_until("pipe removed", || !fifo_of(&live_file).exists());
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
