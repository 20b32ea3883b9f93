//! Whether the repository's docs/ sits beside the package (a checkout of
//! the repository) or not (the published .crate, which holds only this
//! directory): the scenario format's page, docs/scenarios.md, becomes the
//! `scenario_format` module's docs in a checkout only (cfg
//! `grace_repository_docs`).

use std::path::Path;

const FORMAT: &str = "../../docs/scenarios.md";

fn main() {
    println!("cargo::rustc-check-cfg=cfg(grace_repository_docs)");
    println!("cargo::rerun-if-changed=build.rs");
    let Ok(manifest_dir) = std::env::var("CARGO_MANIFEST_DIR") else {
        return;
    };
    if Path::new(&manifest_dir).join(FORMAT).is_file() {
        println!("cargo::rerun-if-changed={FORMAT}");
        println!("cargo::rustc-cfg=grace_repository_docs");
    }
}
