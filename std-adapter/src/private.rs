//! Private files: a directory, and the files in it, that only their owner
//! can change — what [`ProcessActuator::with_state_dir`] keeps its
//! workload table in, and the agent its store and socket.
//!
//! [`ProcessActuator::with_state_dir`]: crate::process::ProcessActuator::with_state_dir
//!
//! Whoever can write the agent's store or connect to its socket can run
//! commands as the agent's user, so these must not depend on the process
//! umask. The rules are OpenSSH's for its keys and `authorized_keys`:
//!
//! - what is created is created private (`0700` directories, `0600`
//!   files), whatever the umask;
//! - an existing path is refused if another user owns it or if its group
//!   or others may write it (someone else may have changed it already);
//! - a directory on the way to it is refused if another user than root
//!   and the process's own owns it, or if group or others may write it
//!   without the sticky bit (`/tmp` is fine), since whoever can write it
//!   can swap the directory below;
//! - a symbolic link on the way is followed only if root or the process's
//!   own user owns it (OpenSSH's `safe_path` checks the path it resolves
//!   the same way): whoever made a link chooses where it leads, and the
//!   directory it leads to would be changed as if it were ours;
//! - the mode of an existing directory is changed only if the program
//!   made it: one that holds the program's store (its `marker`, see
//!   [`private_dir_marked`]) and is only too readable is made private
//!   (`chmod`), which loses nothing and closes the leak; any other is
//!   never `chmod`ed: it is used as it is (nobody else may write it, and
//!   what the program keeps in it is private itself).
//!
//! The checks read the file's metadata and then use the path: a change
//! between the two by someone who could make it would need write access
//! to a directory on the way, which the checks refuse.

use std::fmt;
use std::fs::{DirBuilder, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Group and others may write (`chmod go-w` clears these).
const GROUP_OTHER_WRITE: u32 = 0o022;

/// The sticky bit: in a directory others may write, only a file's owner
/// may rename or remove it.
const STICKY: u32 = 0o1000;

/// What is wrong with a path that should be private.
#[derive(Debug)]
#[non_exhaustive]
pub enum PrivateError {
    /// It could not be read, created or changed.
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Another user owns it.
    NotOwned {
        /// The path.
        path: PathBuf,
        /// Its owner's uid.
        owner: u32,
        /// This process's effective uid.
        uid: u32,
    },
    /// Its group or others may write it.
    Writable {
        /// The path.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A directory on the way to it is another user's, or may be written
    /// by others without the sticky bit.
    UnsafeParent {
        /// The directory.
        path: PathBuf,
        /// Its owner's uid.
        owner: u32,
        /// Its permission bits.
        mode: u32,
    },
    /// It is not the kind of file expected (a directory, a file, a socket).
    WrongKind {
        /// The path.
        path: PathBuf,
        /// What it should be.
        expected: &'static str,
    },
    /// A symbolic link on the way is owned by another user than root and
    /// this process's: it is not followed.
    UntrustedLink {
        /// The link.
        path: PathBuf,
        /// Its owner's uid.
        owner: u32,
        /// This process's effective uid.
        uid: u32,
    },
    /// An existing directory that was not made by this program lacks
    /// permission bits it needs (a group's search bit, say): its mode is
    /// not changed.
    NotMade {
        /// The directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
        /// The bits asked for.
        wanted: u32,
    },
}

impl fmt::Display for PrivateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrivateError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            PrivateError::NotOwned { path, owner, uid } => write!(
                f,
                "{} is owned by uid {owner}, not by this process's user (uid {uid}): \
                 whoever owns it can change what this agent runs; \
                 use a directory of your own, or `chown -R {uid} {}` if it is yours",
                path.display(),
                path.display()
            ),
            PrivateError::Writable { path, mode } => write!(
                f,
                "{} is writable by group or others (mode {:04o}): anyone who can write it \
                 can run commands as this agent's user; fix it with `chmod go-w {}` \
                 (check first that nobody changed it), or remove it and let grace create it",
                path.display(),
                mode & 0o7777,
                path.display()
            ),
            PrivateError::UnsafeParent { path, owner, mode } => write!(
                f,
                "{} (owner uid {owner}, mode {:04o}) is another user's, or writable by others \
                 and not sticky: whoever can change it can replace the data directory below it; \
                 use a data directory whose parents belong to root or to you and are not \
                 writable by others (`chmod go-w {}`)",
                path.display(),
                mode & 0o7777,
                path.display()
            ),
            PrivateError::WrongKind { path, expected } => {
                write!(f, "{} is not a {expected}", path.display())
            }
            PrivateError::UntrustedLink { path, owner, uid } => write!(
                f,
                "{} is a symbolic link owned by uid {owner}, not by root nor by this process's \
                 user (uid {uid}): it is not followed, since whoever made it chooses where the \
                 data goes; name the directory itself",
                path.display()
            ),
            PrivateError::NotMade { path, mode, wanted } => write!(
                f,
                "{} (mode {:04o}) already exists and was not made by grace, which changes the \
                 mode only of what it made: if it is meant for grace, give it mode {:04o} \
                 (with the group) yourself; or name a directory that does not exist yet",
                path.display(),
                mode & 0o7777,
                wanted
            ),
        }
    }
}

impl std::error::Error for PrivateError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PrivateError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> PrivateError + '_ {
    move |source| PrivateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// This process's effective uid.
pub fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Makes `dir` a private directory with permission bits `mode` (`0o700`;
/// `0o710` lets its group reach a socket inside): creates it (and missing
/// parents, `0700`) if it is missing; otherwise checks it is a directory,
/// owned by this process's user and not writable by group or others, and
/// leaves its mode as it is (`0755`, say: an existing directory's mode is
/// never changed; see [`private_dir_marked`]).
/// A symbolic link on the way is followed only if root or this process's
/// user owns it; the directories on the way to it are checked as the
/// [module](self) says.
///
/// `mode` must not let group or others write: such a mode is refused with
/// [`PrivateError::Writable`].
pub fn private_dir(dir: &Path, mode: u32) -> Result<(), PrivateError> {
    private_dir_marked(dir, mode, None).map(|_| ())
}

/// [`private_dir`] for a directory the program keeps a file `marker` in
/// (its store): an existing directory that holds `marker` (a regular file
/// this process's user owns) was made by the program, and is given the
/// bits `mode` if they differ (an older version's `0755`, say). Without
/// the marker an existing directory is treated as [`private_dir`] does.
///
/// `Ok(true)` if the directory is the program's (made now, or marked):
/// its bits are `mode`; `Ok(false)` if it is used as it was found.
pub fn private_dir_marked(
    dir: &Path,
    mode: u32,
    marker: Option<&str>,
) -> Result<bool, PrivateError> {
    if mode & GROUP_OTHER_WRITE != 0 {
        return Err(PrivateError::Writable {
            path: dir.to_path_buf(),
            mode,
        });
    }
    // Every link on the way checked, and resolved: nothing below follows
    // one (but one a trusted user makes meanwhile).
    let dir = &resolve(dir)?;
    if let Some(parent) = dir.parent() {
        check_parents(parent)?;
    }
    let created = match std::fs::symlink_metadata(dir) {
        Ok(_) => false,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io_error(dir))?;
            true
        }
        Err(e) => return Err(io_error(dir)(e)),
    };
    let meta = std::fs::symlink_metadata(dir).map_err(io_error(dir))?;
    if !meta.is_dir() {
        return Err(PrivateError::WrongKind {
            path: dir.to_path_buf(),
            expected: "directory",
        });
    }
    check_owner_and_mode(dir, &meta)?;
    let ours = created || marker.is_some_and(|m| holds_marker(dir, m));
    if ours && meta.mode() & 0o7777 != mode {
        std::fs::set_permissions(dir, Permissions::from_mode(mode)).map_err(io_error(dir))?;
    }
    Ok(ours)
}

/// Whether `dir` holds `marker`, a regular file (not a link) this
/// process's user owns.
fn holds_marker(dir: &Path, marker: &str) -> bool {
    std::fs::symlink_metadata(dir.join(marker))
        .is_ok_and(|m| m.file_type().is_file() && m.uid() == effective_uid())
}

/// The most symbolic links followed on one path (Linux's limit).
const MAX_LINKS: u32 = 40;

/// `path` made absolute, with every symbolic link on it resolved, each
/// checked first: owned by root or this process's user
/// ([`PrivateError::UntrustedLink`] otherwise). What does not exist yet is
/// kept as it is written.
fn resolve(path: &Path) -> Result<PathBuf, PrivateError> {
    use std::path::Component;
    let uid = effective_uid();
    let absolute = std::path::absolute(path).map_err(io_error(path))?;
    // The parts still to walk, the next one last.
    let mut todo: Vec<std::ffi::OsString> = Vec::new();
    let push_parts = |todo: &mut Vec<std::ffi::OsString>, p: &Path| {
        for part in p.components().rev() {
            match part {
                Component::Prefix(_) | Component::CurDir => {}
                Component::RootDir => todo.push("/".into()),
                Component::ParentDir => todo.push("..".into()),
                Component::Normal(n) => todo.push(n.to_owned()),
            }
        }
    };
    push_parts(&mut todo, &absolute);
    let mut done = PathBuf::from("/");
    let mut links = 0_u32;
    let mut missing = false;
    while let Some(part) = todo.pop() {
        if part == "/" {
            done = PathBuf::from("/");
            continue;
        }
        if part == ".." {
            done.pop();
            continue;
        }
        let next = done.join(&part);
        if missing {
            done = next;
            continue;
        }
        match std::fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                if meta.uid() != uid && meta.uid() != 0 {
                    return Err(PrivateError::UntrustedLink {
                        path: next,
                        owner: meta.uid(),
                        uid,
                    });
                }
                links = links.saturating_add(1);
                if links > MAX_LINKS {
                    return Err(PrivateError::Io {
                        path: path.to_path_buf(),
                        source: io::Error::other("too many levels of symbolic links"),
                    });
                }
                let target = std::fs::read_link(&next).map_err(io_error(&next))?;
                push_parts(&mut todo, &target);
            }
            Ok(_) => done = next,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                missing = true;
                done = next;
            }
            Err(e) => return Err(io_error(&next)(e)),
        }
    }
    Ok(done)
}

/// Checks each directory from `dir` up to `/`: owned by root or this
/// process's user, and not writable by group or others unless sticky.
fn check_parents(dir: &Path) -> Result<(), PrivateError> {
    let uid = effective_uid();
    for ancestor in dir.ancestors() {
        let meta = match std::fs::metadata(ancestor) {
            Ok(m) => m,
            // Created (private) by `private_dir`.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_error(ancestor)(e)),
        };
        let mode = meta.mode();
        let trusted_owner = meta.uid() == 0 || meta.uid() == uid;
        let others_write = mode & GROUP_OTHER_WRITE != 0;
        if !trusted_owner || others_write && mode & STICKY == 0 {
            return Err(PrivateError::UnsafeParent {
                path: ancestor.to_path_buf(),
                owner: meta.uid(),
                mode,
            });
        }
    }
    Ok(())
}

fn check_owner_and_mode(path: &Path, meta: &std::fs::Metadata) -> Result<(), PrivateError> {
    let uid = effective_uid();
    if meta.uid() != uid {
        return Err(PrivateError::NotOwned {
            path: path.to_path_buf(),
            owner: meta.uid(),
            uid,
        });
    }
    if meta.mode() & GROUP_OTHER_WRITE != 0 {
        return Err(PrivateError::Writable {
            path: path.to_path_buf(),
            mode: meta.mode(),
        });
    }
    Ok(())
}

/// Makes `file` (in a private directory) a private regular file, `0600`:
/// creates it empty if it is missing; otherwise checks it is a regular
/// file (not a symbolic link), owned by this process's user and not
/// writable by group or others, and takes away what group and others may
/// read.
pub fn private_file(file: &Path) -> Result<(), PrivateError> {
    match std::fs::symlink_metadata(file) {
        Ok(meta) => {
            if !meta.file_type().is_file() {
                return Err(PrivateError::WrongKind {
                    path: file.to_path_buf(),
                    expected: "regular file",
                });
            }
            check_owner_and_mode(file, &meta)?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // `create_new`: never through a link someone put there.
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(file)
            {
                Ok(_) => {}
                // Created meanwhile: checked on the next call.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return private_file(file),
                Err(e) => return Err(io_error(file)(e)),
            }
        }
        Err(e) => return Err(io_error(file)(e)),
    }
    std::fs::set_permissions(file, Permissions::from_mode(0o600)).map_err(io_error(file))
}

/// Checks an existing unix socket (one an earlier agent left, say)
/// before it is replaced: a socket, owned by this process's user and not
/// writable by group or others. `Ok` if there is none.
pub fn check_socket(socket: &Path) -> Result<(), PrivateError> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(socket) {
        Ok(meta) if !meta.file_type().is_socket() => Err(PrivateError::WrongKind {
            path: socket.to_path_buf(),
            expected: "unix socket",
        }),
        Ok(meta) => check_owner_and_mode(socket, &meta),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_error(socket)(e)),
    }
}

/// Sets the permission bits of `path` to `mode`, and its group to `gid`
/// if given (a socket a group may connect to).
pub fn set_mode(path: &Path, mode: u32, gid: Option<u32>) -> Result<(), PrivateError> {
    if let Some(gid) = gid {
        std::os::unix::fs::lchown(path, None, Some(gid)).map_err(io_error(path))?;
    }
    std::fs::set_permissions(path, Permissions::from_mode(mode)).map_err(io_error(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).expect("exists").mode() & 0o7777
    }

    #[test]
    fn a_missing_dir_is_created_private_with_its_parents() {
        let root = tempfile::tempdir().expect("temp dir");
        let dir = root.path().join("a/b");
        private_dir(&dir, 0o700).expect("created");
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&root.path().join("a")) & 0o077, 0);
    }

    #[test]
    fn a_dir_others_can_write_is_refused_and_left_as_it_is() {
        let root = tempfile::tempdir().expect("temp dir");
        let dir = root.path().join("d");
        std::fs::create_dir(&dir).expect("made");
        std::fs::set_permissions(&dir, Permissions::from_mode(0o777)).expect("chmod");
        let e = private_dir(&dir, 0o700).expect_err("refused");
        assert!(matches!(e, PrivateError::Writable { .. }), "{e}");
        assert!(e.to_string().contains("chmod go-w"), "{e}");
        assert_eq!(mode(&dir), 0o777);
    }

    #[test]
    fn a_readable_dir_with_the_marker_and_a_readable_file_are_made_private() {
        let root = tempfile::tempdir().expect("temp dir");
        let dir = root.path().join("d");
        std::fs::create_dir(&dir).expect("made");
        std::fs::set_permissions(&dir, Permissions::from_mode(0o755)).expect("chmod");
        std::fs::write(dir.join("store"), b"").expect("written");
        private_dir_marked(&dir, 0o700, Some("store")).expect("accepted");
        assert_eq!(mode(&dir), 0o700);
        let file = dir.join("f");
        std::fs::write(&file, b"x").expect("written");
        std::fs::set_permissions(&file, Permissions::from_mode(0o644)).expect("chmod");
        private_file(&file).expect("accepted");
        assert_eq!(mode(&file), 0o600);
        assert_eq!(std::fs::read(&file).expect("read"), b"x");
    }

    #[test]
    fn a_file_others_can_write_or_a_link_is_refused() {
        let root = tempfile::tempdir().expect("temp dir");
        let file = root.path().join("f");
        std::fs::write(&file, b"x").expect("written");
        std::fs::set_permissions(&file, Permissions::from_mode(0o666)).expect("chmod");
        assert!(matches!(
            private_file(&file),
            Err(PrivateError::Writable { .. })
        ));
        let link = root.path().join("l");
        std::os::unix::fs::symlink(&file, &link).expect("linked");
        assert!(matches!(
            private_file(&link),
            Err(PrivateError::WrongKind { .. })
        ));
    }

    #[test]
    fn a_parent_others_can_write_without_the_sticky_bit_is_refused() {
        let root = tempfile::tempdir().expect("temp dir");
        let open = root.path().join("open");
        std::fs::create_dir(&open).expect("made");
        std::fs::set_permissions(&open, Permissions::from_mode(0o777)).expect("chmod");
        let e = private_dir(&open.join("d"), 0o700).expect_err("refused");
        assert!(matches!(e, PrivateError::UnsafeParent { .. }), "{e}");
        std::fs::set_permissions(&open, Permissions::from_mode(0o1777)).expect("chmod");
        private_dir(&open.join("d"), 0o700).expect("sticky, like /tmp");
    }

    #[test]
    fn a_readable_dir_without_the_marker_is_used_and_left_as_it_is() {
        let root = tempfile::tempdir().expect("temp dir");
        let dir = root.path().join("d");
        std::fs::create_dir(&dir).expect("made");
        std::fs::set_permissions(&dir, Permissions::from_mode(0o755)).expect("chmod");
        let ours = private_dir_marked(&dir, 0o700, Some("store")).expect("accepted");
        assert!(!ours);
        assert_eq!(mode(&dir), 0o755);
    }

    #[test]
    fn a_link_of_this_user_is_followed_through_dot_dot_too() {
        let root = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(root.path().join("real")).expect("made");
        std::os::unix::fs::symlink("real", root.path().join("l")).expect("linked");
        let via = root.path().join("l/../real/d");
        private_dir(&via, 0o700).expect("created");
        assert_eq!(mode(&root.path().join("real/d")), 0o700);
        assert_eq!(
            resolve(&via).expect("resolved"),
            root.path()
                .canonicalize()
                .expect("canonical")
                .join("real/d")
        );
    }

    #[test]
    fn a_mode_that_lets_others_write_is_refused() {
        let root = tempfile::tempdir().expect("temp dir");
        assert!(matches!(
            private_dir(&root.path().join("d"), 0o770),
            Err(PrivateError::Writable { .. })
        ));
    }
}
