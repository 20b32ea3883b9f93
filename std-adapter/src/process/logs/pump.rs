//! The log pump: one thread that reads every container's pipe (an epoll
//! loop) and writes what it reads into the container's log file, rotating
//! by rename at the size limit. The agent owns the write path, so the
//! bound holds at any write rate: a container that writes faster than its
//! log is written waits on its full pipe.
//!
//! What cannot be written (the log file cannot be opened, written or
//! rotated: a full disk, a removed directory) is dropped, counted, and
//! marked in the log at the next write that works:
//! `[grace: 123456 bytes dropped]`.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rustix::buffer::spare_capacity;
use rustix::event::epoll;
use rustix::io::Errno;

use std::time::SystemTime;

use super::cri::{LogTime, encode_line, record_len};
use super::{LogLimits, fifo_of, rotated};

/// How much one read takes from a pipe.
const READ_SIZE: usize = 64 * 1024;

/// How many reads one container gets per turn: the others' turns come
/// between (fairness among writers).
const READS_PER_TURN: usize = 4;

/// The most readiness events taken from one wait.
const EVENTS_PER_WAIT: usize = 256;

/// The pump thread and the pipes it reads.
#[derive(Debug)]
pub(super) struct Pump {
    epoll: OwnedFd,
    /// The pipes being read, by epoll token. A sink being pumped is out
    /// of the map meanwhile (so that adding one never waits on a disk).
    sinks: Mutex<HashMap<u64, Sink>>,
    next: AtomicU64,
}

/// Whether a pipe is still open for writing.
pub(super) enum Flow {
    /// A writer is there (or was, at the last read).
    Open,
    /// No writer is left: the pipe is done with.
    Ended,
}

/// One container's pipe and log file.
#[derive(Debug)]
pub(super) struct Sink {
    /// The read end of the container's pipe (non-blocking).
    pipe: OwnedFd,
    /// The log file being written (the pipe is the FIFO beside it,
    /// removed when it ends).
    log: PathBuf,
    limits: LogLimits,
    /// The log file, open while its pipe holds more to write (closed once
    /// the pipe is drained: an idle container costs the agent one file
    /// descriptor, its pipe's).
    file: Option<File>,
    /// Its size.
    size: u64,
    /// Bytes dropped since the last marker.
    dropped: u64,
    /// Whether the last byte written ended a line.
    line_start: bool,
}

impl Sink {
    /// A sink from `pipe` (the read end of the FIFO beside `log`) into
    /// `log`.
    pub(super) fn new(pipe: OwnedFd, log: PathBuf, limits: LogLimits) -> Self {
        Sink {
            pipe,
            log,
            limits,
            file: None,
            size: 0,
            dropped: 0,
            line_start: true,
        }
    }

    /// Reads what the pipe holds (a few reads at most) into the log.
    pub(super) fn pump(&mut self, buf: &mut [u8]) -> Flow {
        for _ in 0..READS_PER_TURN {
            match rustix::io::read(&self.pipe, &mut *buf) {
                Ok(0) => return Flow::Ended, // no writer left
                Ok(n) => self.append(buf.get(..n).unwrap_or_default()),
                Err(Errno::AGAIN) => {
                    // Drained: the log file is closed until more comes.
                    self.file = None;
                    return Flow::Open;
                }
                Err(Errno::INTR) => {}
                Err(_) => return Flow::Ended,
            }
        }
        Flow::Open
    }

    /// Appends `data` to the log as records ([`cri`](super::cri)), in
    /// one write for all its lines: the marker of bytes dropped before it
    /// first, if any; rotated by rename whenever the file is full, so no
    /// file ever holds more than `max_bytes`, and before a record that
    /// would not fit whole (a record longer than a file is cut). What
    /// cannot be written is dropped and counted (as output bytes).
    pub(super) fn append(&mut self, data: &[u8]) {
        let stamp = LogTime::of(SystemTime::now()).rfc3339_nanos();
        if self.file.is_none() {
            // The size is read at the open: another agent may have written.
            let _ = self.open();
        }
        let mut batch = Vec::with_capacity(data.len().saturating_mul(2));
        if self.dropped > 0 {
            // A record cut by the failure is ended first.
            if !self.line_start {
                batch.push(b'\n');
            }
            let dropped = std::mem::take(&mut self.dropped);
            let text = format!("[grace: {dropped} bytes dropped]\n");
            if !self.add(&stamp, text.as_bytes(), &mut batch) {
                self.dropped = dropped;
                self.drop_bytes(data.len());
                return;
            }
        }
        for line in data.split_inclusive(|b| *b == b'\n') {
            if !self.add(&stamp, line, &mut batch) {
                self.drop_bytes(line.len());
            }
        }
        // On an error, what is left of the batch was counted by `write`.
        let _ = self.write(&batch);
    }

    /// Adds the record of one line to `batch`, after writing the batch
    /// and rotating if the record would not fit whole in the file.
    /// `false`: the rotation failed, the record is not added.
    fn add(&mut self, stamp: &str, line: &[u8], batch: &mut Vec<u8>) -> bool {
        let len = record_len(stamp, line) as u64;
        let used = self.size.saturating_add(batch.len() as u64);
        let max = self.limits.max_bytes;
        if len <= max && used.saturating_add(len) > max && used > 0 {
            let written = self.write(batch);
            batch.clear();
            if written.is_err() || self.rotate().is_err() {
                return false;
            }
        }
        encode_line(stamp, line, batch);
        true
    }

    /// Counts `n` bytes as dropped.
    fn drop_bytes(&mut self, n: usize) {
        self.dropped = self.dropped.saturating_add(n as u64);
    }

    /// Writes `data`, rotating when the file is full; on an error, the
    /// rest of `data` is counted as dropped.
    fn write(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let room = self.limits.max_bytes.saturating_sub(self.size);
            if room == 0 {
                if let Err(e) = self.rotate() {
                    self.drop_bytes(data.len());
                    return Err(e);
                }
                continue;
            }
            let file = match self.file.as_mut() {
                Some(file) => file,
                None => match self.open() {
                    Ok(file) => file,
                    Err(e) => {
                        self.drop_bytes(data.len());
                        return Err(e);
                    }
                },
            };
            let n = usize::try_from(room).unwrap_or(usize::MAX).min(data.len());
            let (now, rest) = data.split_at(n);
            if let Err(e) = file.write_all(now) {
                // Part of `now` may be in the file: the size is read again
                // at the next open.
                self.file = None;
                self.drop_bytes(data.len());
                return Err(e);
            }
            self.size = self.size.saturating_add(n as u64);
            self.line_start = now.last() == Some(&b'\n');
            data = rest;
        }
        Ok(())
    }

    /// Opens the log file (appending), reading its size.
    fn open(&mut self) -> io::Result<&mut File> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&self.log)?;
        self.size = file.metadata()?.len();
        Ok(self.file.insert(file))
    }

    /// Rotation by rename: `.(n-2)` → `.(n-1)`, .., the file → `.1` (the
    /// oldest copy goes), and a new, empty file.
    fn rotate(&mut self) -> io::Result<()> {
        self.file = None;
        for n in (1..self.limits.max_files.saturating_sub(1)).rev() {
            let from = rotated(&self.log, n);
            if from.exists() {
                std::fs::rename(&from, rotated(&self.log, n.saturating_add(1)))?;
            }
        }
        std::fs::rename(&self.log, rotated(&self.log, 1))?;
        // Created at once: a reader always finds the file being written.
        let _ = self.open()?;
        Ok(())
    }
}

impl Pump {
    /// Starts the pump thread.
    pub(super) fn start() -> io::Result<Arc<Pump>> {
        let pump = Arc::new(Pump {
            epoll: epoll::create(epoll::CreateFlags::CLOEXEC)?,
            sinks: Mutex::default(),
            next: AtomicU64::new(0),
        });
        let running = Arc::clone(&pump);
        let _ = std::thread::Builder::new()
            .name("grace-logs".into())
            .spawn(move || running.run())?;
        Ok(pump)
    }

    /// Pumps `sink` from now on.
    pub(super) fn add(&self, sink: Sink) -> io::Result<()> {
        let token = self.next.fetch_add(1, Ordering::Relaxed);
        let mut sinks = self.sinks.lock().unwrap_or_else(PoisonError::into_inner);
        epoll::add(
            &self.epoll,
            &sink.pipe,
            epoll::EventData::new_u64(token),
            epoll::EventFlags::IN,
        )?;
        let _ = sinks.insert(token, sink);
        Ok(())
    }

    fn run(&self) {
        let mut buf = vec![0_u8; READ_SIZE];
        let mut ready: Vec<epoll::Event> = Vec::with_capacity(EVENTS_PER_WAIT);
        loop {
            ready.clear();
            match epoll::wait(&self.epoll, spare_capacity(&mut ready), None) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
            for event in &ready {
                let token = event.data.u64();
                let taken = self
                    .sinks
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&token);
                let Some(mut sink) = taken else { continue };
                match sink.pump(&mut buf) {
                    Flow::Open => {
                        let _ = self
                            .sinks
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .insert(token, sink);
                    }
                    Flow::Ended => {
                        let _ = epoll::delete(&self.epoll, &sink.pipe);
                        if sink.dropped > 0 {
                            sink.append(b"");
                        }
                        let _ = std::fs::remove_file(fifo_of(&sink.log));
                    }
                }
            }
        }
    }
}
