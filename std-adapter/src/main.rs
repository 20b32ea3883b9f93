//! The `grace` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

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
    /// Replay a scenario file and print what happens, and when.
    Simulate {
        /// The scenario (JSON, see SCENARIOS.md).
        file: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

/// A parsed `--stop-signal`.
#[derive(Copy, Clone, Debug)]
struct SignalArg(rustix::process::Signal);

fn parse_signal(name: &str) -> Result<SignalArg, String> {
    grace_std::run::parse_signal(name).map(SignalArg)
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
            let options = grace_std::run::RunOptions {
                command,
                grace_period_seconds: grace_period,
                pre_stop,
                stop_signal: stop_signal.0,
            };
            match grace_std::run::run(&options) {
                Ok(code) => ExitCode::from(code),
                Err(e) => {
                    eprintln!("grace run: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Command::Demo { data_dir } => {
            let mut out = std::io::stdout();
            match grace_std::demo::run(&mut out, data_dir.as_deref()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("grace demo: {e}");
                    ExitCode::from(1)
                }
            }
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
    let scenario = match grace_std::parse(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("grace: {}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let timeline = match grace_std::simulate(&scenario) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("grace: {}: {e}", file.display());
            return ExitCode::from(1);
        }
    };
    let out = match format {
        Format::Text => timeline.to_text(),
        Format::Json => timeline.to_json_lines(),
        Format::Svg => timeline.to_svg_with(&grace_std::svg::SvgOptions::of(&scenario)),
    };
    print!("{out}");
    ExitCode::SUCCESS
}
