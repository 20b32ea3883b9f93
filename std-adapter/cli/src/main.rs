//! The `grace` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use grace_cli::kubectl;

/// Kubernetes-grade graceful deletion.
#[derive(Parser)]
#[command(name = "grace", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Supervise one command like a one-container pod: on SIGTERM or
    /// SIGINT, stop it the Kubernetes way; exit with its status.
    Run {
        /// The grace period in seconds.
        #[arg(long, default_value_t = 30, allow_negative_numbers = true)]
        grace_period: i64,
        /// A pre-stop hook, run with `sh -c` within the grace.
        #[arg(long)]
        pre_stop: Option<String>,
        /// The stop signal (TERM, INT, QUIT, HUP, USR1, USR2, WINCH or a number).
        #[arg(long, default_value = "TERM", value_parser = parse_signal)]
        stop_signal: SignalArg,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Delete three real processes the Kubernetes way and watch the
    /// timeline (about 6 s; uses a temporary embedded store).
    Demo {
        /// Keep the store in this directory instead of a temporary one.
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Run the node agent: serve the store in the data directory to the
    /// other commands, run the objects bound to this node, and carry out
    /// their deletions. Stops on SIGTERM or SIGINT, leaving its workloads
    /// running: the next agent on the same data directory adopts them.
    Agent {
        #[command(flatten)]
        store: StoreArgs,
        /// The node this agent runs objects for (`spec.nodeName`).
        #[arg(long, default_value = "local")]
        node: String,
        /// After a restart, start a kill in progress again with the full
        /// grace instead of keeping its deadline (D6).
        #[arg(long)]
        reset_full_grace: bool,
        /// With --etcd: seconds after the agent's last sign of life until
        /// its node counts as lost.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(2..=3600))]
        lease_ttl: u64,
        /// Rotate a container's log file once it is bigger than this
        /// (bytes, or with a suffix Ki, Mi, Gi).
        #[arg(long, default_value = "10Mi", value_parser = parse_size)]
        log_max_size: u64,
        /// Log files kept per container: the one being written and its
        /// rotated copies (2 to 100).
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(2..=100))]
        log_max_files: u32,
    },
    /// Print a container's output (stdout and stderr), as the agent of
    /// this machine kept it.
    Logs {
        #[command(flatten)]
        store: StoreArgs,
        /// The object's name.
        name: String,
        /// The container; may be left out when the object has one.
        #[arg(short = 'c', long)]
        container: Option<String>,
        /// Keep printing what it writes, until the object is deleted (or
        /// Ctrl-C).
        #[arg(short = 'f', long)]
        follow: bool,
        /// Only the last N lines.
        #[arg(long, value_name = "N")]
        tail: Option<usize>,
    },
    /// Declare a node gone for good (D7): its agent, should it come back,
    /// may no longer act, and its objects are deleted as PodGC does on a
    /// deleted node (R82). Needs --etcd; refused while the node's agent
    /// is alive.
    Fence {
        #[command(flatten)]
        store: StoreArgs,
        /// The node.
        node: String,
    },
    /// Create an object from a JSON file (`-` for standard input).
    Apply {
        #[command(flatten)]
        store: StoreArgs,
        /// The object file.
        #[arg(short = 'f', long = "filename")]
        file: PathBuf,
    },
    /// Delete an object the Kubernetes way.
    Delete {
        #[command(flatten)]
        store: StoreArgs,
        /// The object's name.
        name: String,
        /// Seconds to wait before the kill; 0 with --force deletes at once.
        /// Unset (or negative): the object's own grace.
        #[arg(long, allow_negative_numbers = true)]
        grace_period: Option<i64>,
        /// Remove the record at once, without waiting for the workload to
        /// stop (with --grace-period 0 or unset).
        #[arg(long)]
        force: bool,
        /// Decide and show the result, but change nothing.
        #[arg(long)]
        dry_run: bool,
        /// What happens to dependents.
        #[arg(long, value_enum)]
        cascade: Option<CascadeArg>,
        /// Only if the object still has this uid.
        #[arg(long)]
        uid: Option<String>,
        /// Only if the object is still at this resource version.
        #[arg(long)]
        resource_version: Option<String>,
    },
    /// Show objects; a deleted object being stopped shows `Terminating`.
    Get {
        #[command(flatten)]
        store: StoreArgs,
        /// One object; all if omitted.
        name: Option<String>,
        /// Output format.
        #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputArg::Table)]
        output: OutputArg,
        /// After listing, watch for changes (needs a running agent).
        #[arg(short = 'w', long)]
        watch: bool,
    },
    /// Change an object: remove a finalizer (which may end its deletion).
    Patch {
        #[command(flatten)]
        store: StoreArgs,
        /// The object's name.
        name: String,
        /// The finalizer to remove.
        #[arg(long, required = true)]
        remove_finalizer: String,
    },
    /// Replay a scenario file and print what happens, and when.
    Simulate {
        /// The scenario (JSON; the format is docs/scenarios.md).
        file: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

/// Where the store lives.
#[derive(clap::Args)]
struct StoreArgs {
    /// The data directory (store and agent socket).
    #[arg(long, default_value = "grace-data")]
    data_dir: PathBuf,
    /// Use a store shared by agents on several nodes instead: etcd at
    /// these endpoints (comma-separated, such as http://127.0.0.1:2379).
    /// Needs a build with the `etcd` feature.
    #[arg(long, value_name = "ENDPOINTS")]
    etcd: Option<String>,
    /// The key prefix of the store in etcd (one prefix, one store).
    #[arg(long, default_value = "/grace/")]
    etcd_prefix: String,
}

/// A store command's store, opened.
enum Opened<'a> {
    Dir(&'a std::path::Path),
    #[cfg(feature = "etcd")]
    Etcd(grace_std::store::EtcdStore),
}

impl StoreArgs {
    fn open(&self) -> Result<Opened<'_>, kubectl::CommandError> {
        let Some(endpoints) = &self.etcd else {
            grace_cli::agent::check_data_dir(&self.data_dir)
                .map_err(kubectl::CommandError::invalid)?;
            return Ok(Opened::Dir(&self.data_dir));
        };
        #[cfg(feature = "etcd")]
        {
            let endpoints: Vec<String> = endpoints.split(',').map(str::to_owned).collect();
            let options = grace_std::store::EtcdOptions {
                prefix: self.etcd_prefix.clone(),
                ..grace_std::store::EtcdOptions::new(endpoints.clone())
            };
            grace_std::store::EtcdStore::connect_with(options)
                .map(Opened::Etcd)
                .map_err(|e| kubectl::CommandError::failed(format!("--etcd {endpoints:?}: {e}")))
        }
        #[cfg(not(feature = "etcd"))]
        Err(kubectl::CommandError::invalid(format!(
            "--etcd {endpoints}: this grace was built without the `etcd` feature \
             (cargo install grace-cli --features etcd)"
        )))
    }
}

impl Opened<'_> {
    fn target(&self) -> kubectl::Target<'_> {
        match self {
            Opened::Dir(dir) => kubectl::Target::Agent(dir),
            #[cfg(feature = "etcd")]
            Opened::Etcd(store) => kubectl::Target::Shared(store),
        }
    }
}

/// Runs a store command on the store `args` names.
fn on_store(
    command: &str,
    args: &StoreArgs,
    run: impl FnOnce(kubectl::Target<'_>) -> Result<(), kubectl::CommandError>,
) -> ExitCode {
    let result = args.open().and_then(|opened| run(opened.target()));
    finish(command, result)
}

#[derive(Copy, Clone, ValueEnum)]
enum CascadeArg {
    Background,
    Foreground,
    Orphan,
}

#[derive(Copy, Clone, ValueEnum)]
enum OutputArg {
    /// kubectl's table.
    Table,
    /// JSON.
    Json,
}

/// A parsed `--stop-signal`.
#[derive(Copy, Clone, Debug)]
struct SignalArg(rustix::process::Signal);

/// A size in bytes: a whole number, or with a suffix `Ki`, `Mi`, `Gi`
/// (powers of 1024, as Kubernetes quantities); at least 1.
fn parse_size(text: &str) -> Result<u64, String> {
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, ""),
    };
    let shift = match unit {
        "" => 0,
        "Ki" => 10,
        "Mi" => 20,
        "Gi" => 30,
        other => return Err(format!("unknown unit `{other}` (use Ki, Mi or Gi)")),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a size (such as 10Mi)"))?;
    let bytes = n
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("`{text}` is too big"))?;
    if bytes == 0 {
        return Err("must be at least 1 byte".into());
    }
    Ok(bytes)
}

fn parse_signal(name: &str) -> Result<SignalArg, String> {
    grace_cli::run::parse_signal(name).map(SignalArg)
}

#[derive(Copy, Clone, ValueEnum)]
enum Format {
    /// A readable timeline.
    Text,
    /// JSON lines, one object a line (the public format).
    Json,
    /// A picture of the timeline (SVG): lanes, phases as bars, marked times.
    Svg,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Simulate { file, format } => simulate(&file, format),
        Command::Run {
            grace_period,
            pre_stop,
            stop_signal,
            command,
        } => {
            let options = grace_cli::run::RunOptions {
                command,
                grace_period_seconds: grace_period,
                pre_stop,
                stop_signal: stop_signal.0,
            };
            match grace_cli::run::run(&options) {
                Ok(code) => ExitCode::from(code),
                Err(e) => {
                    eprintln!("grace run: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Command::Fence { store, node } => fence(&store, &node),
        Command::Agent {
            store,
            node,
            reset_full_grace,
            lease_ttl,
            log_max_size,
            log_max_files,
        } => {
            let options = grace_cli::agent::AgentOptions {
                data_dir: store.data_dir.clone(),
                node,
                recovery: if reset_full_grace {
                    grace_std::Recovery::ResetFullGrace
                } else {
                    grace_std::Recovery::HonourOriginalDeadline
                },
                log_limits: grace_std::process::logs::LogLimits {
                    max_bytes: log_max_size,
                    max_files: log_max_files,
                },
            };
            if let Err(e) = grace_cli::manifest::check_name("--node", &options.node) {
                eprintln!("grace agent: {e}");
                return ExitCode::from(2);
            }
            if store.etcd.is_some() {
                return shared_agent(&store, options, lease_ttl);
            }
            if let Err(e) = grace_cli::agent::check_data_dir(&options.data_dir) {
                eprintln!("grace agent: {e}");
                return ExitCode::from(2);
            }
            match grace_cli::agent::run(&options, &mut std::io::stdout()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("grace agent: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Command::Apply { store, file } => on_store("apply", &store, |target| {
            kubectl::apply(target, &file, &mut std::io::stdout())
        }),
        Command::Delete {
            store,
            name,
            grace_period,
            force,
            dry_run,
            cascade,
            uid,
            resource_version,
        } => {
            let flags = kubectl::DeleteFlags {
                grace_period,
                force,
                dry_run,
                cascade: cascade.map(|c| match c {
                    CascadeArg::Background => kubectl::Cascade::Background,
                    CascadeArg::Foreground => kubectl::Cascade::Foreground,
                    CascadeArg::Orphan => kubectl::Cascade::Orphan,
                }),
                uid,
                resource_version,
            };
            on_store("delete", &store, |target| {
                kubectl::delete(
                    target,
                    &name,
                    &flags,
                    &mut std::io::stdout(),
                    &mut std::io::stderr(),
                )
            })
        }
        Command::Get {
            store,
            name,
            output,
            watch,
        } => {
            let output = match output {
                OutputArg::Table => kubectl::Output::Table,
                OutputArg::Json => kubectl::Output::Json,
            };
            on_store("get", &store, |target| {
                kubectl::get(
                    target,
                    name.as_deref(),
                    output,
                    watch,
                    &mut std::io::stdout(),
                )
            })
        }
        Command::Logs {
            store,
            name,
            container,
            follow,
            tail,
        } => {
            let options = grace_cli::logs::LogsOptions {
                container,
                follow,
                tail,
            };
            let data_dir = store.data_dir.clone();
            on_store("logs", &store, |target| {
                grace_cli::logs::print(target, &data_dir, &name, &options, &mut std::io::stdout())
            })
        }
        Command::Patch {
            store,
            name,
            remove_finalizer,
        } => on_store("patch", &store, |target| {
            kubectl::remove_finalizer(target, &name, &remove_finalizer, &mut std::io::stdout())
        }),
        Command::Demo { data_dir } => {
            let mut out = std::io::stdout();
            match grace_cli::demo::run(&mut out, data_dir.as_deref()) {
                Ok(grace_cli::demo::Ended::Done) => ExitCode::SUCCESS,
                Ok(grace_cli::demo::Ended::Interrupted(signal)) => {
                    ExitCode::from(u8::try_from(128 + signal).unwrap_or(1))
                }
                Err(e) => {
                    eprintln!("grace demo: {e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}

/// `grace agent --etcd ..`: one node's agent on a shared store.
fn shared_agent(
    store: &StoreArgs,
    options: grace_cli::agent::AgentOptions,
    lease_ttl: u64,
) -> ExitCode {
    let opened = match store.open() {
        Ok(o) => o,
        Err(e) => return finish("agent", Err(e)),
    };
    #[cfg(feature = "etcd")]
    if let Opened::Etcd(etcd) = opened {
        let shared = grace_cli::node_agent::SharedAgentOptions {
            state_dir: store.data_dir.join(format!("workloads-{}", options.node)),
            logs: grace_cli::agent::container_logs(
                &store.data_dir,
                Some(&options.node),
                options.log_limits,
            ),
            node: options.node,
            recovery: options.recovery,
            lease_ttl: std::time::Duration::from_secs(lease_ttl),
        };
        return match grace_cli::node_agent::run(etcd, &shared, &mut std::io::stdout()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("grace agent: {e}");
                ExitCode::from(1)
            }
        };
    }
    let _ = (opened, options, lease_ttl);
    finish(
        "agent",
        Err(kubectl::CommandError::invalid("--etcd: no shared store")),
    )
}

/// `grace fence NODE --etcd ..`.
fn fence(store: &StoreArgs, node: &str) -> ExitCode {
    if store.etcd.is_none() {
        return finish(
            "fence",
            Err(kubectl::CommandError::invalid(
                "fence needs --etcd: with one machine there is no other node to fence",
            )),
        );
    }
    let opened = match store.open() {
        Ok(o) => o,
        Err(e) => return finish("fence", Err(e)),
    };
    #[cfg(feature = "etcd")]
    if let Opened::Etcd(etcd) = &opened {
        return match grace_cli::node_agent::fence(etcd, node, false) {
            Ok(names) => {
                println!("node \"{node}\" fenced; objects deleted: {}", names.len());
                for name in names {
                    println!("object \"{name}\" deleted (node gone)");
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("grace fence: {e}");
                ExitCode::from(1)
            }
        };
    }
    let _ = (opened, node);
    finish(
        "fence",
        Err(kubectl::CommandError::invalid("--etcd: no shared store")),
    )
}

/// Prints a store command's error on one line; its exit code.
fn finish(command: &str, result: Result<(), kubectl::CommandError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("grace {command}: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}

fn simulate(file: &PathBuf, format: Format) -> ExitCode {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("grace: cannot read {}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let scenario = match grace_cli::parse(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("grace: {}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let timeline = match grace_cli::simulate(&scenario) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("grace: {}: {e}", file.display());
            return ExitCode::from(1);
        }
    };
    let out = match format {
        Format::Text => timeline.to_text(),
        Format::Json => timeline.to_json_lines(),
        Format::Svg => timeline.to_svg_with(&grace_cli::svg::SvgOptions::of(&scenario)),
    };
    print!("{out}");
    ExitCode::SUCCESS
}
