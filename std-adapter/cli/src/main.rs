//! The `grace` command line.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use clap_complete::engine::ArgValueCompleter;
use grace_cli::kubectl;
use grace_cli::namespace::Namespace;
use grace_cli::output::Format as GetFormat;

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
    Run(RunArgs),
    /// Internal: how `grace run` starts its command, so that the command
    /// dies with it (a parent-death signal, then `exec`).
    #[command(hide = true)]
    RunExec {
        /// The pid of the `grace run` that started this process.
        #[arg(long)]
        parent: u32,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<std::ffi::OsString>,
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
    /// running: the next agent on the same data directory adopts them
    /// (unless --on-exit=stop). Its log goes to standard output, filtered
    /// by RUST_LOG (default `info`; e.g. `warn`, `grace_agent=debug,info`).
    Agent(AgentArgs),
    /// Print a kubeconfig for another user to reach the agent's
    /// Kubernetes API (`grace agent --k8s-api`): a new key and a client
    /// certificate signed by the agent's CA, CN = --user, one O per
    /// --group. Run by the agent's owner (only it can read the CA's key).
    /// The API gives the certificate the socket's access: a --group that
    /// names the agent's --allow-group (as given to it) has that group's
    /// access (`:ro` get, list and watch; `:rw` changes too).
    Kubeconfig {
        /// The agent's data directory.
        #[arg(long, env = "GRACE_DATA_DIR", default_value = "grace-data")]
        data_dir: PathBuf,
        /// The user (the certificate's CN).
        #[arg(long)]
        user: String,
        /// A group of the user (an O of the certificate; repeatable).
        #[arg(long)]
        group: Vec<String>,
        /// The server's URL (default: the one DATA_DIR/kubeconfig names).
        #[arg(long, value_name = "URL")]
        server: Option<String>,
    },
    /// Print a container's output (stdout and stderr), as the agent of
    /// this machine kept it.
    Logs {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        namespace: NamespaceArgs,
        /// `pod NAME`, `pod/NAME` or `NAME` (none with `-l`).
        #[arg(num_args = 0..=2, add = ArgValueCompleter::new(grace_cli::completion::objects))]
        args: Vec<String>,
        /// The logs of every pod whose labels match (`--tail` is then 10
        /// unless given, as kubectl's).
        #[arg(short = 'l', long = "selector")]
        selector: Option<String>,
        /// The container; the default one when left out (the annotation
        /// kubectl.kubernetes.io/default-container, or the first).
        #[arg(short = 'c', long)]
        container: Option<String>,
        /// Every container's output, one after another.
        #[arg(long, conflicts_with = "container")]
        all_containers: bool,
        /// Each line begins with `[pod/NAME/CONTAINER] `.
        #[arg(long)]
        prefix: bool,
        /// Only lines newer than this (5s, 2m, 1h).
        #[arg(long, value_parser = parse_duration, conflicts_with = "since_time")]
        since: Option<std::time::Duration>,
        /// Only lines at this RFC 3339 time or later.
        #[arg(long, value_parser = parse_log_time)]
        since_time: Option<grace_std::process::logs::cri::LogTime>,
        /// Each line begins with the time it was written (RFC 3339, UTC).
        #[arg(long)]
        timestamps: bool,
        /// Keep printing what it writes, until the object is deleted (or
        /// Ctrl-C).
        #[arg(short = 'f', long)]
        follow: bool,
        /// Only the last N lines.
        #[arg(long, value_name = "N")]
        tail: Option<usize>,
        /// The output of the container's previous instance, as kubectl's
        /// `--previous`: grace restarts no container, so there is none.
        #[arg(short = 'p', long)]
        previous: bool,
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
    /// Create or update objects from Kubernetes Pod manifests, YAML or
    /// JSON (as `kubectl apply -f`).
    Apply {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        namespace: NamespaceArgs,
        /// A manifest file, a directory of them, or `-` for standard input
        /// (repeatable; several documents per file).
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<PathBuf>,
    },
    /// Delete objects the Kubernetes way (`TYPE NAME…`, `TYPE/NAME…`,
    /// `NAME…`, `-f`, `-l` or `--all`), and wait until they are gone.
    Delete(DeleteArgs),
    /// Show objects; a deleted object being stopped shows `Terminating`.
    Get(GetArgs),
    /// Show an object in detail, with the state of its deletion: each
    /// decision, its reason and its rule.
    Describe {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        namespace: NamespaceArgs,
        /// `pod NAME…`, `pod/NAME…` or `NAME…`.
        #[arg(add = ArgValueCompleter::new(grace_cli::completion::objects))]
        args: Vec<String>,
        /// Objects whose labels match.
        #[arg(short = 'l', long = "selector")]
        selector: Option<String>,
    },
    /// Wait until objects are deleted, created, or meet a condition (as
    /// kubectl wait: `--for=delete`, `create`, `condition=Ready`,
    /// `jsonpath={.status.phase}=Succeeded`).
    Wait {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        namespace: NamespaceArgs,
        /// `pod NAME…`, `pod/NAME…` or `NAME…`.
        #[arg(add = ArgValueCompleter::new(grace_cli::completion::objects))]
        args: Vec<String>,
        /// What to wait for: `delete`, `create`, `condition=NAME[=VALUE]`
        /// (a pod condition such as `Ready`; `True` by default) or
        /// `jsonpath=PATH[=VALUE]` (`jsonpath={.status.phase}=Succeeded`).
        #[arg(long = "for", required = true, value_parser = grace_cli::wait_for::WaitFor::parse)]
        condition: grace_cli::wait_for::WaitFor,
        /// Objects whose labels match.
        #[arg(short = 'l', long = "selector")]
        selector: Option<String>,
        /// Every object.
        #[arg(long)]
        all: bool,
        /// How long to wait (30s, 2m; 0: as long as it takes).
        #[arg(long, default_value = "30s", value_parser = parse_duration)]
        timeout: std::time::Duration,
    },
    /// Print a shell completion script (bash, zsh or fish), as kubectl's:
    /// `source <(grace completion bash)`. Object arguments complete to
    /// the names stored now (in GRACE_DATA_DIR, or ./grace-data).
    Completion {
        /// The shell.
        shell: grace_cli::completion::Shell,
    },
    /// Change an object, as kubectl patch: `-p PATCH` (strategic merge,
    /// JSON merge or JSON patch) or remove a finalizer (which may end its
    /// deletion).
    #[command(group = clap::ArgGroup::new("change").required(true).args(["patch", "remove_finalizer"]))]
    Patch {
        #[command(flatten)]
        store: StoreArgs,
        #[command(flatten)]
        namespace: NamespaceArgs,
        /// `pod NAME`, `pod/NAME` or `NAME`.
        #[arg(required = true, num_args = 1..=2, add = ArgValueCompleter::new(grace_cli::completion::objects))]
        args: Vec<String>,
        /// The patch, JSON or YAML (`{"metadata":{"labels":{"a":"b"}}}`).
        #[arg(short = 'p', long)]
        patch: Option<String>,
        /// The patch's kind: `strategic` (kubectl's default), `merge`
        /// (RFC 7386) or `json` (RFC 6902).
        #[arg(long = "type", default_value = "strategic")]
        patch_type: String,
        /// The finalizer to remove.
        #[arg(long)]
        remove_finalizer: Option<String>,
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

// The arguments of `grace run`.
#[derive(Args)]
struct RunArgs {
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
}

// The arguments of `grace agent`.
#[derive(Args)]
struct AgentArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// The node this agent runs objects for (`spec.nodeName`).
    #[arg(long, default_value = "local")]
    node: String,
    /// After a restart, start a kill in progress again with the full
    /// grace instead of keeping its deadline (D6).
    #[arg(long)]
    reset_full_grace: bool,
    /// Let the members of GROUP talk to the agent too (its own user and
    /// root always may): `:ro` (the default) to get and watch only,
    /// `:rw` to change objects as well, which runs their commands as
    /// the agent's user. The data directory and socket are given to
    /// the group. Without --etcd only.
    #[arg(long, value_name = "GROUP[:ro|:rw]")]
    allow_group: Option<grace_agent::AllowGroup>,
    /// With --etcd: seconds after the agent's last sign of life until
    /// its node counts as lost.
    #[arg(help_heading = ETCD_OPTIONS, long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(2..=3600))]
    lease_ttl: u64,
    /// Rotate a container's log file once it is bigger than this
    /// (bytes, or with a suffix Ki, Mi, Gi).
    #[arg(long, default_value = "10Mi", value_parser = parse_size)]
    log_max_size: u64,
    /// Log files kept per container: the one being written and its
    /// rotated copies (2 to 100).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(2..=100))]
    log_max_files: u32,
    /// What SIGTERM or SIGINT does with the workloads: `leave` them
    /// running for the next agent to adopt, or `stop` each one the
    /// Kubernetes way first, as a node's graceful shutdown does (its
    /// grace: pre-stop hook, stop signal, SIGKILL no sooner than 2 s
    /// after it), then exit. The objects stay. Without --etcd only.
    #[arg(long, default_value = "leave", value_name = "leave|stop")]
    on_exit: grace_agent::OnExit,
    /// Serve the Kubernetes API for Pods over HTTPS on ADDR:PORT (e.g.
    /// 127.0.0.1:6443), for kubectl and kube-rs, and write
    /// DATA_DIR/kubeconfig (mode 0600) for this user. Nothing listens
    /// without it. Without --etcd only.
    #[arg(long, value_name = "ADDR:PORT")]
    k8s_api: Option<std::net::SocketAddr>,
}

// The arguments of `grace delete`.
#[derive(Args)]
struct DeleteArgs {
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    namespace: NamespaceArgs,
    /// `pod NAME…`, `pod/NAME…` or `NAME…`.
    #[arg(add = ArgValueCompleter::new(grace_cli::completion::objects))]
    args: Vec<String>,
    /// The objects of these manifests (files, directories, `-`).
    #[arg(short = 'f', long = "filename")]
    files: Vec<PathBuf>,
    /// Objects whose labels match (`app=web`, `tier in (a,b)`, `!x`).
    #[arg(short = 'l', long = "selector")]
    selector: Option<String>,
    /// Objects whose fields match (`status.phase=Succeeded`,
    /// `spec.nodeName!=a`; the pod fields Kubernetes selects on).
    #[arg(long, value_name = "SELECTOR", value_parser = grace_cli::field_selector::FieldSelector::parse)]
    field_selector: Option<grace_cli::field_selector::FieldSelector>,
    /// Every object.
    #[arg(long)]
    all: bool,
    /// A missing object is not an error.
    #[arg(long)]
    ignore_not_found: bool,
    /// Seconds to wait before the kill; 0 with --force deletes at once.
    /// Unset (or negative): the object's own grace.
    #[arg(long, allow_negative_numbers = true)]
    grace_period: Option<i64>,
    /// A grace of 1 s (as --grace-period=1).
    #[arg(long)]
    now: bool,
    /// Remove the record at once, without waiting for the workload to
    /// stop (with --grace-period 0 or unset).
    #[arg(long)]
    force: bool,
    /// Wait until the objects are gone (--wait=false returns at once).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    wait: bool,
    /// How long to wait (30s, 2m; 0: as long as it takes).
    #[arg(long, default_value = "0", value_parser = parse_duration)]
    timeout: std::time::Duration,
    /// `name`: print `pod/NAME` for each object deleted.
    #[arg(short = 'o', long = "output", value_parser = ["name"])]
    output: Option<String>,
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
    /// `-v` (or kubectl's `-v=N`, N > 0): also say on standard error what
    /// became of each object (terminating with its grace, held by
    /// finalizers, removed).
    #[arg(short = 'v', long = "v", value_name = "N", num_args = 0..=1, default_missing_value = "1", require_equals = true)]
    verbosity: Option<u8>,
}

// The arguments of `grace get`.
#[derive(Args)]
struct GetArgs {
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    namespace: NamespaceArgs,
    /// Every namespace (a NAMESPACE column first).
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// `pods`, `pod NAME…`, `pod/NAME…` or `NAME…`; all if omitted.
    #[arg(add = ArgValueCompleter::new(grace_cli::completion::objects))]
    args: Vec<String>,
    /// Objects whose labels match (`app=web`, `tier in (a,b)`, `!x`).
    #[arg(short = 'l', long = "selector")]
    selector: Option<String>,
    /// Output format: table, wide, name, json, yaml, stored,
    /// jsonpath=TEMPLATE, jsonpath-file=FILE, custom-columns=SPEC or
    /// custom-columns-file=FILE (kubectl's).
    #[arg(short = 'o', long = "output", value_name = "FORMAT", default_value = "table", value_parser = GetFormat::parse)]
    output: GetFormat,
    /// No header line in tables.
    #[arg(long)]
    no_headers: bool,
    /// Objects whose fields match (`status.phase=Running`,
    /// `spec.nodeName=a,metadata.name!=b`; the pod fields Kubernetes
    /// selects on).
    #[arg(long, value_name = "SELECTOR", value_parser = grace_cli::field_selector::FieldSelector::parse)]
    field_selector: Option<grace_cli::field_selector::FieldSelector>,
    /// List in the order of this field (`.metadata.name`,
    /// `{.metadata.creationTimestamp}`).
    #[arg(long, value_name = "PATH", value_parser = grace_cli::sort_by::SortKey::parse)]
    sort_by: Option<grace_cli::sort_by::SortKey>,
    /// A LABELS column with every label.
    #[arg(long)]
    show_labels: bool,
    /// A column for each of these label keys (comma-separated, or the
    /// option again).
    #[arg(
        short = 'L',
        long = "label-columns",
        value_name = "KEYS",
        value_delimiter = ','
    )]
    label_columns: Vec<String>,
    /// After listing, watch for changes (needs a running agent).
    #[arg(short = 'w', long)]
    watch: bool,
}

/// The help heading of the options of a store shared through etcd.
const ETCD_OPTIONS: &str = "A store shared by several nodes (etcd)";

/// Where the store lives.
#[derive(clap::Args)]
// Without the `etcd` feature the etcd flags are parsed, then refused with
// --etcd itself.
#[cfg_attr(not(feature = "etcd"), allow(dead_code))]
struct StoreArgs {
    /// The data directory (store and agent socket).
    #[arg(long, env = "GRACE_DATA_DIR", default_value = "grace-data")]
    data_dir: PathBuf,
    /// Use a store shared by agents on several nodes instead: etcd at
    /// these endpoints (comma-separated, such as http://127.0.0.1:2379).
    /// Needs a build with the `etcd` feature.
    #[arg(help_heading = ETCD_OPTIONS, long, value_name = "ENDPOINTS", env = "GRACE_ETCD_ENDPOINTS")]
    etcd: Option<String>,
    /// The key prefix of the store in etcd (one prefix, one store).
    #[arg(help_heading = ETCD_OPTIONS, long, default_value = "/grace/")]
    etcd_prefix: String,
    /// With --etcd: TLS, trusting the CA certificate in this PEM file
    /// (the endpoints must be https://).
    #[arg(help_heading = ETCD_OPTIONS, long, value_name = "FILE", env = "GRACE_ETCD_CACERT")]
    etcd_cacert: Option<PathBuf>,
    /// With --etcd-cacert: the client certificate (PEM), for an etcd that
    /// checks client certificates (--client-cert-auth).
    #[arg(help_heading = ETCD_OPTIONS,
        long,
        value_name = "FILE",
        env = "GRACE_ETCD_CERT",
        requires = "etcd_key"
    )]
    etcd_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(help_heading = ETCD_OPTIONS,
        long,
        value_name = "FILE",
        env = "GRACE_ETCD_KEY",
        requires = "etcd_cert"
    )]
    etcd_key: Option<PathBuf>,
    /// With --etcd: the etcd user (etcd's authentication). Its password
    /// comes from the file --etcd-password-file (GRACE_ETCD_PASSWORD_FILE)
    /// or the variable GRACE_ETCD_PASSWORD, never from the command line.
    #[arg(help_heading = ETCD_OPTIONS, long, value_name = "USER", env = "GRACE_ETCD_USER")]
    etcd_user: Option<String>,
    /// The etcd user's password: the first line of this file.
    #[arg(help_heading = ETCD_OPTIONS, long, value_name = "FILE", env = "GRACE_ETCD_PASSWORD_FILE")]
    etcd_password_file: Option<PathBuf>,
}

/// The namespace of a command that names objects.
#[derive(clap::Args)]
struct NamespaceArgs {
    /// The namespace the names are in (default: the variable
    /// GRACE_NAMESPACE, else `default`); a manifest in another namespace
    /// is refused.
    #[arg(short = 'n', long)]
    namespace: Option<String>,
}

impl NamespaceArgs {
    /// `-n`, else GRACE_NAMESPACE, else `default`; every one with `all`.
    fn resolve(&self, all: bool) -> Result<Namespace, kubectl::CommandError> {
        let variable = std::env::var(grace_cli::namespace::NAMESPACE_VARIABLE).ok();
        Namespace::resolve(self.namespace.as_deref(), variable.as_deref(), all)
    }
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
            grace_agent::check_data_dir(&self.data_dir)
                .map_err(|e| kubectl::CommandError::invalid(e.to_string()))?;
            return Ok(Opened::Dir(&self.data_dir));
        };
        #[cfg(feature = "etcd")]
        {
            let endpoints: Vec<String> = endpoints.split(',').map(str::to_owned).collect();
            let (tls, auth) = self.etcd_security()?;
            let options = grace_std::store::EtcdOptions {
                prefix: self.etcd_prefix.clone(),
                tls,
                auth,
                ..grace_std::store::EtcdOptions::new(endpoints.clone())
            };
            grace_std::store::EtcdStore::connect_with(options)
                .map(Opened::Etcd)
                .map_err(|e| kubectl::CommandError::failed(format!("--etcd {endpoints:?}: {e}")))
        }
        #[cfg(not(feature = "etcd"))]
        Err(kubectl::CommandError::invalid(format!(
            "--etcd {endpoints}: this grace was built without the `etcd` feature \
             (from the repository: cargo install --path std-adapter/cli --features etcd)"
        )))
    }
}

#[cfg(feature = "etcd")]
impl StoreArgs {
    /// TLS and authentication to etcd, from the flags (or their variables)
    /// and the password's file or variable.
    fn etcd_security(
        &self,
    ) -> Result<
        (
            Option<grace_std::store::EtcdTls>,
            Option<grace_std::store::EtcdAuth>,
        ),
        kubectl::CommandError,
    > {
        use kubectl::CommandError;
        let tls = match (&self.etcd_cacert, &self.etcd_cert, &self.etcd_key) {
            (Some(ca), cert, key) => {
                let identity = cert.as_deref().zip(key.as_deref());
                Some(
                    grace_std::store::EtcdTls::from_files(ca, identity)
                        .map_err(|e| CommandError::invalid(format!("--etcd-cacert: {e}")))?,
                )
            }
            (None, Some(_), _) | (None, _, Some(_)) => {
                return Err(CommandError::invalid(
                    "--etcd-cert and --etcd-key need --etcd-cacert (the CA that signed etcd's certificate)",
                ));
            }
            (None, None, None) => None,
        };
        let auth = match &self.etcd_user {
            None => None,
            Some(user) if user.contains(':') => {
                return Err(CommandError::invalid(
                    "--etcd-user: give the user alone; the password goes in \
                     --etcd-password-file or GRACE_ETCD_PASSWORD, never on the command line",
                ));
            }
            Some(user) => Some(grace_std::store::EtcdAuth {
                user: user.clone(),
                password: self.etcd_password()?,
            }),
        };
        Ok((tls, auth))
    }

    /// The password: the first line of --etcd-password-file, else
    /// GRACE_ETCD_PASSWORD.
    fn etcd_password(&self) -> Result<String, kubectl::CommandError> {
        use kubectl::CommandError;
        if let Some(file) = &self.etcd_password_file {
            let text = std::fs::read_to_string(file).map_err(|e| {
                CommandError::invalid(format!("--etcd-password-file {}: {e}", file.display()))
            })?;
            return Ok(text.lines().next().unwrap_or_default().to_owned());
        }
        std::env::var("GRACE_ETCD_PASSWORD").map_err(|_| {
            CommandError::invalid(
                "--etcd-user needs a password: --etcd-password-file FILE \
                 (GRACE_ETCD_PASSWORD_FILE) or the variable GRACE_ETCD_PASSWORD",
            )
        })
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

fn parse_log_time(text: &str) -> Result<grace_std::process::logs::cri::LogTime, String> {
    grace_std::process::logs::cri::LogTime::parse(text)
        .ok_or_else(|| format!("\"{text}\" is not an RFC 3339 time (2026-11-28T01:45:21Z)"))
}

fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    kubectl::parse_duration(text)
}

/// The one object `pod NAME`, `pod/NAME` or `NAME` names.
fn one_name(args: &[String]) -> Result<String, kubectl::CommandError> {
    let parsed = grace_cli::resource::parse(args)?;
    match parsed.names.as_slice() {
        [name] => Ok(name.clone()),
        _ => Err(kubectl::CommandError::invalid(
            "one object: `pod NAME`, `pod/NAME` or `NAME`",
        )),
    }
}

/// The objects named on the command line.
fn selection(
    args: &[String],
    selector: Option<&str>,
    all: bool,
    fields: Option<grace_cli::field_selector::FieldSelector>,
    namespace: Namespace,
) -> Result<kubectl::Selection, kubectl::CommandError> {
    let selector = selector
        .map(|s| {
            grace_cli::selector::Selector::parse(s)
                .map_err(|e| kubectl::CommandError::invalid(format!("-l: {e}")))
        })
        .transpose()?;
    Ok(kubectl::Selection {
        args: grace_cli::resource::parse(args)?,
        selector,
        all,
        fields,
        namespace,
    })
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
    // A completion request from the shell function `grace completion`
    // registered: answered here, and the process ends.
    clap_complete::CompleteEnv::with_factory(Cli::command)
        .var(grace_cli::completion::VARIABLE)
        .complete();
    let cli = Cli::parse();
    match cli.command {
        Command::Simulate { file, format } => simulate(&file, format),
        Command::Run(args) => run(args),
        Command::RunExec { parent, command } => {
            ExitCode::from(grace_cli::run::exec_child(parent, &command))
        }
        Command::Fence { store, node } => fence(&store, &node),
        Command::Agent(args) => agent(args),
        Command::Kubeconfig {
            data_dir,
            user,
            group,
            server,
        } => kubeconfig(&data_dir, &user, &group, server.as_deref()),
        Command::Apply {
            store,
            namespace,
            files,
        } => on_store("apply", &store, |target| {
            grace_cli::apply::apply(
                target,
                &namespace.resolve(false)?,
                &files,
                &mut std::io::stdout(),
                &mut grace_cli::escape::Escaping::new(std::io::stderr()),
            )
        }),
        Command::Delete(args) => delete(args),
        Command::Get(args) => get(args),
        Command::Describe {
            store,
            namespace,
            args,
            selector,
        } => on_store("describe", &store, |target| {
            let selection = selection(
                &args,
                selector.as_deref(),
                false,
                None,
                namespace.resolve(false)?,
            )?;
            grace_cli::describe::describe(target, &selection, &mut std::io::stdout())
        }),
        Command::Wait {
            store,
            namespace,
            args,
            condition,
            selector,
            all,
            timeout,
        } => on_store("wait", &store, |target| {
            let selection = selection(
                &args,
                selector.as_deref(),
                all,
                None,
                namespace.resolve(false)?,
            )?;
            let timeout = (!timeout.is_zero()).then_some(timeout);
            kubectl::wait(
                target,
                &selection,
                &condition,
                timeout,
                &mut std::io::stdout(),
            )
        }),
        Command::Completion { shell } => {
            // Written whole, once: a reader that stops early (`| head`)
            // ends the output quietly, as for every other command.
            let mut script = Vec::new();
            let written =
                grace_cli::completion::write_registration(shell, &mut script).and_then(|()| {
                    let mut stdout = std::io::stdout().lock();
                    stdout.write_all(&script).and_then(|()| stdout.flush())
                });
            match written {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("grace completion: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Logs {
            store,
            namespace,
            args,
            selector,
            container,
            all_containers,
            prefix,
            since,
            since_time,
            timestamps,
            follow,
            tail,
            previous,
        } => {
            let now = grace_std::process::logs::cri::LogTime::of(std::time::SystemTime::now());
            let mut options = grace_cli::logs::LogsOptions {
                container,
                all_containers,
                prefix,
                follow,
                tail,
                previous,
                since: since.map(|d| now.minus(d)).or(since_time),
                timestamps,
            };
            let data_dir = store.data_dir.clone();
            on_store("logs", &store, |target| {
                let namespace = namespace.resolve(false)?;
                let keys = match selector {
                    Some(selector) if args.is_empty() => {
                        // kubectl's default with a selector.
                        options.tail.get_or_insert(10);
                        let selector = grace_cli::selector::Selector::parse(&selector)
                            .map_err(|e| kubectl::CommandError::invalid(format!("-l: {e}")))?;
                        let (_, items) = kubectl::fetch_all(target)?;
                        let keys: Vec<String> = items
                            .into_iter()
                            .filter(|i| {
                                namespace.holds(&i.name) && selector.matches(&i.object.labels)
                            })
                            .map(|i| i.name)
                            .collect();
                        if keys.is_empty() {
                            eprintln!("No resources found in {} namespace.", namespace.name);
                        }
                        keys
                    }
                    Some(_) => {
                        return Err(kubectl::CommandError::invalid(
                            "only one of a name or -l may be given",
                        ));
                    }
                    None => vec![namespace.key(&one_name(&args)?)],
                };
                grace_cli::logs::print_all(
                    target,
                    &data_dir,
                    &keys,
                    &options,
                    &mut std::io::stdout(),
                    &mut std::io::stderr(),
                )
            })
        }
        Command::Patch {
            store,
            namespace,
            args,
            patch,
            patch_type,
            remove_finalizer,
        } => on_store("patch", &store, |target| {
            let name = one_name(&args)?;
            let key = namespace.resolve(false)?.key(&name);
            let out = &mut std::io::stdout();
            match (patch, remove_finalizer) {
                (Some(text), _) => {
                    let kind = grace_cli::patch::patch_type(&patch_type)?;
                    grace_cli::patch::patch(target, &key, &text, kind, out)
                }
                (None, Some(finalizer)) => kubectl::remove_finalizer(target, &key, &finalizer, out),
                (None, None) => Err(kubectl::CommandError::invalid("-p or --remove-finalizer")),
            }
        }),
        Command::Demo { data_dir } => demo(data_dir.as_deref()),
    }
}

/// `grace run`: supervise one command like a one-container pod.
fn run(args: RunArgs) -> ExitCode {
    let options = grace_cli::run::RunOptions {
        command: args.command,
        grace_period_seconds: args.grace_period,
        pre_stop: args.pre_stop,
        stop_signal: args.stop_signal.0,
    };
    match grace_cli::run::run(&options) {
        Ok(code) => ExitCode::from(code),
        Err(grace_cli::run::RunError::CannotRun { reason, code }) => {
            eprintln!("grace run: {reason}");
            ExitCode::from(code)
        }
        Err(e) => {
            eprintln!("grace run: {e}");
            ExitCode::from(1)
        }
    }
}

/// `grace agent`: one node's agent, on its data directory or on etcd.
fn agent(args: AgentArgs) -> ExitCode {
    let AgentArgs {
        store,
        node,
        reset_full_grace,
        allow_group,
        lease_ttl,
        log_max_size,
        log_max_files,
        on_exit,
        k8s_api,
    } = args;
    if let Err(e) = grace_cli::agent_log::init() {
        eprintln!("grace agent: {e}");
        return ExitCode::from(2);
    }
    let mut options = grace_agent::AgentOptions::new(store.data_dir.clone());
    options.node = node;
    if reset_full_grace {
        options.recovery = grace_std::Recovery::ResetFullGrace;
    }
    options.allow_group = allow_group;
    options.log_limits = grace_std::process::logs::LogLimits {
        max_bytes: log_max_size,
        max_files: log_max_files,
    };
    options.on_exit = on_exit;
    options.k8s_api = k8s_api;
    // The agent is this process's only user of children.
    options.subreaper = true;
    if let Err(e) = grace_cli::manifest::check_name("--node", &options.node) {
        eprintln!("grace agent: {e}");
        return ExitCode::from(2);
    }
    if store.etcd.is_some() {
        if options.allow_group.is_some() {
            eprintln!("grace agent: --allow-group: an agent on --etcd has no socket");
            return ExitCode::from(2);
        }
        if options.on_exit != grace_agent::OnExit::Leave {
            eprintln!(
                "grace agent: --on-exit=stop: not with --etcd (its agent leaves its workloads running)"
            );
            return ExitCode::from(2);
        }
        if options.k8s_api.is_some() {
            eprintln!("grace agent: --k8s-api: not with --etcd yet");
            return ExitCode::from(2);
        }
        return shared_agent(&store, options, lease_ttl);
    }
    if let Err(e) = grace_agent::check_data_dir(&options.data_dir) {
        eprintln!("grace agent: {e}");
        return ExitCode::from(2);
    }
    match grace_agent::run(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("grace agent: {e}");
            ExitCode::from(1)
        }
    }
}

/// `grace delete`: kubectl's flags as a delete command on the store.
fn delete(args: DeleteArgs) -> ExitCode {
    let DeleteArgs {
        store,
        namespace,
        args,
        files,
        selector,
        field_selector,
        all,
        ignore_not_found,
        grace_period,
        now,
        force,
        wait,
        timeout,
        output,
        dry_run,
        cascade,
        uid,
        resource_version,
        verbosity,
    } = args;
    on_store("delete", &store, |target| {
        let command = kubectl::DeleteCommand {
            selection: selection(
                &args,
                selector.as_deref(),
                all,
                field_selector,
                namespace.resolve(false)?,
            )?,
            files,
            ignore_not_found,
            now,
            wait,
            timeout: (!timeout.is_zero()).then_some(timeout),
            output_name: output.is_some(),
            verbose: verbosity.is_some_and(|level| level > 0),
            flags: kubectl::DeleteFlags {
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
            },
        };
        kubectl::delete(
            target,
            &command,
            &mut std::io::stdout(),
            &mut grace_cli::escape::Escaping::new(std::io::stderr()),
        )
    })
}

/// `grace get`: list (and maybe watch) objects in kubectl's formats.
fn get(args: GetArgs) -> ExitCode {
    let GetArgs {
        store,
        namespace,
        all_namespaces,
        args,
        selector,
        output,
        no_headers,
        watch,
        field_selector,
        sort_by,
        show_labels,
        label_columns,
    } = args;
    on_store("get", &store, |target| {
        let namespace = namespace.resolve(all_namespaces)?;
        let options = kubectl::GetOptions {
            selection: selection(&args, selector.as_deref(), false, field_selector, namespace)?,
            format: output,
            no_headers,
            watch,
            sort_by,
            labels: grace_cli::output::LabelColumns {
                keys: label_columns,
                all: show_labels,
            },
        };
        kubectl::get(
            target,
            &options,
            &mut std::io::stdout(),
            &mut grace_cli::escape::Escaping::new(std::io::stderr()),
        )
    })
}

/// `grace demo`: exits 128 + the signal when interrupted.
/// `grace kubeconfig`: a kubeconfig for `user`, on standard output.
fn kubeconfig(
    data_dir: &std::path::Path,
    user: &str,
    groups: &[String],
    server: Option<&str>,
) -> ExitCode {
    let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
    match grace_agent::k8s_api::user_kubeconfig(data_dir, user, &groups, server) {
        Ok(text) => {
            let mut out = std::io::stdout().lock();
            if out
                .write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .is_err()
            {
                return ExitCode::from(1);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            match std::error::Error::source(&e) {
                Some(cause) => eprintln!("grace kubeconfig: {e}: {cause}"),
                None => eprintln!("grace kubeconfig: {e}"),
            }
            ExitCode::from(1)
        }
    }
}

fn demo(data_dir: Option<&std::path::Path>) -> ExitCode {
    let mut out = std::io::stdout();
    match grace_cli::demo::run(&mut out, data_dir) {
        Ok(grace_cli::demo::Ended::Done) => ExitCode::SUCCESS,
        Ok(grace_cli::demo::Ended::Interrupted(signal)) => {
            ExitCode::from(u8::try_from(signal.saturating_add(128)).unwrap_or(1))
        }
        Err(e) => {
            eprintln!("grace demo: {e}");
            ExitCode::from(1)
        }
    }
}

/// `grace agent --etcd ..`: one node's agent on a shared store.
fn shared_agent(store: &StoreArgs, options: grace_agent::AgentOptions, lease_ttl: u64) -> ExitCode {
    // Its container logs live there: private, as the local agent's.
    #[cfg(feature = "etcd")]
    if let Err(e) = grace_std::private::private_dir(&store.data_dir, 0o700) {
        eprintln!("grace agent: refusing to start: {e}");
        return ExitCode::from(1);
    }
    let opened = match store.open() {
        Ok(o) => o,
        Err(e) => return finish("agent", Err(e)),
    };
    #[cfg(feature = "etcd")]
    if let Opened::Etcd(etcd) = opened {
        let shared = grace_agent::node_agent::SharedAgentOptions {
            // This agent owns its process (it takes SIGTERM and SIGINT): the
            // process's children are all its workloads.
            subreaper: true,
            state_dir: store.data_dir.join(format!("workloads-{}", options.node)),
            logs: grace_agent::container_logs(
                &store.data_dir,
                Some(&options.node),
                options.log_limits,
            ),
            node: options.node,
            recovery: options.recovery,
            lease_ttl: std::time::Duration::from_secs(lease_ttl),
        };
        return match grace_agent::node_agent::run(etcd, &shared) {
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
        return match grace_agent::node_agent::fence(etcd, node, false) {
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
            // An empty message: what failed was printed already.
            if !e.message.is_empty() {
                // One line; a name in it cannot drive the terminal.
                eprintln!(
                    "grace {command}: {}",
                    grace_cli::escape::escape(&e.message, false)
                );
            }
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
    let scenario = match grace_sim::parse(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("grace: {}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let timeline = match grace_sim::simulate(&scenario) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("grace: {}: {e}", file.display());
            return ExitCode::from(1);
        }
    };
    let out = match format {
        Format::Text => timeline.to_text(),
        Format::Json => timeline.to_json_lines(),
        Format::Svg => timeline.to_svg_with(&grace_sim::svg::SvgOptions::of(&scenario)),
    };
    print!("{out}");
    ExitCode::SUCCESS
}
