//! Where the standard streams of the processes the actuator starts go.

use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};

use super::logs::ContainerLogs;
use crate::store::StoredObject;

/// Where a workload's stdin, stdout and stderr go. A pre-stop hook's stdin
/// is always `/dev/null`; its stdout and stderr are the supervisor's with
/// [`Output::Inherit`], discarded otherwise.
#[derive(Clone, Debug, Default)]
pub enum Output {
    /// `/dev/null`, all three.
    #[default]
    Discard,
    /// The supervisor's own: an entrypoint or `ExecStart` wrapper such as
    /// `grace run` passes its stdin, stdout and stderr through.
    Inherit,
    /// stdin `/dev/null`; stdout and stderr a pipe the supervisor reads
    /// into the container's log file ([`ContainerLogs`]).
    Logs(ContainerLogs),
}

impl Output {
    /// Sets the streams of container `container` of `object` (stored as
    /// `name`) on `command`; fails if its log pipe cannot be made. With
    /// [`Output::Logs`], returns the pipe's keeper
    /// ([`ContainerOutput::keeper`](super::logs::ContainerOutput)), to be
    /// dropped once the workload is started.
    pub(crate) fn workload(
        &self,
        command: &mut Command,
        name: &str,
        object: &StoredObject,
        container: usize,
    ) -> std::io::Result<Option<OwnedFd>> {
        match self {
            Output::Discard => {
                command
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null());
            }
            Output::Inherit => {
                command
                    .stdin(Stdio::inherit())
                    .stdout(Stdio::inherit())
                    .stderr(Stdio::inherit());
            }
            Output::Logs(logs) => {
                let output = logs.open(name, object, container)?;
                let err = output.writer.try_clone()?;
                command
                    .stdin(Stdio::null())
                    .stdout(Stdio::from(output.writer))
                    .stderr(Stdio::from(err));
                return Ok(Some(output.keeper));
            }
        }
        Ok(None)
    }

    /// Sets the streams of a pre-stop hook on `command`: stdin is always
    /// `/dev/null` (the workload may be reading it); stdout and stderr are
    /// the supervisor's with [`Output::Inherit`], discarded otherwise (the
    /// kubelet keeps an exec hook's output only to report its failure).
    pub(crate) fn hook(&self, command: &mut Command) {
        command.stdin(Stdio::null());
        match self {
            Output::Inherit => {
                command.stdout(Stdio::inherit()).stderr(Stdio::inherit());
            }
            Output::Discard | Output::Logs(_) => {
                command.stdout(Stdio::null()).stderr(Stdio::null());
            }
        }
    }
}
