//! What an agent does with its workloads when it stops (`--on-exit`).

/// What the agent does with its workloads when SIGTERM or SIGINT stops it
/// (`--on-exit`), or [`Agent::shutdown`](crate::Agent::shutdown).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnExit {
    /// Leave them running, their records as they are: the next agent
    /// adopts them (as the kubelet leaves its containers).
    #[default]
    Leave,
    /// Stop each one the Kubernetes way first, as the kubelet's graceful
    /// node shutdown does (R84): every object bound here that runs and is
    /// not being deleted yet is evicted with its own grace (pre-stop hook,
    /// stop signal, SIGKILL when the grace is spent and never sooner than
    /// 2 s after the stop signal); deletions in progress go on as they
    /// are. The agent exits once none of their processes is left. The
    /// objects stay, their containers stopped; workloads whose object is
    /// gone are left running.
    Stop,
}

impl std::str::FromStr for OnExit {
    type Err = UnknownOnExit;

    /// `leave` or `stop`.
    fn from_str(arg: &str) -> Result<Self, UnknownOnExit> {
        match arg {
            "leave" => Ok(OnExit::Leave),
            "stop" => Ok(OnExit::Stop),
            other => Err(UnknownOnExit(other.to_owned())),
        }
    }
}

/// A value of `--on-exit` that is neither `leave` nor `stop` (the value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownOnExit(pub String);

impl std::fmt::Display for UnknownOnExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}`: expected `leave` or `stop`", self.0)
    }
}

impl std::error::Error for UnknownOnExit {}
