//! `grace-public-api FILE.json`: the public API in a rustdoc JSON file, one
//! item a line, sorted. Blanket, auto-trait and derived impls are left out:
//! they follow from the items and only make the diff noisy.

use std::io::Write as _;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: grace-public-api RUSTDOC.json");
        return ExitCode::from(2);
    };
    let api = public_api::Builder::from_rustdoc_json(path)
        .omit_blanket_impls(true)
        .omit_auto_trait_impls(true)
        .omit_auto_derived_impls(true)
        .build();
    match api {
        Ok(api) => {
            let mut out = std::io::stdout().lock();
            for item in api.items() {
                // A closed pipe (`| head`) ends the listing quietly.
                if writeln!(out, "{item}").is_err() {
                    break;
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("grace-public-api: {e}");
            ExitCode::FAILURE
        }
    }
}
