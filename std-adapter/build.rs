//! Whether the repository's README and docs/ sit beside the package (a
//! checkout of the repository) or not (the published .crate, which holds
//! only this directory): their Rust examples run as doctests of this crate
//! in a checkout only (cfg `grace_repository_docs`).

use std::path::Path;

/// The repository's documents whose examples are doctests here.
const DOCS: [&str; 4] = [
    "README.md",
    "docs/core.md",
    "docs/runtime.md",
    "docs/etcd.md",
];

fn main() {
    println!("cargo::rustc-check-cfg=cfg(grace_repository_docs)");
    println!("cargo::rerun-if-changed=build.rs");
    let Ok(manifest_dir) = std::env::var("CARGO_MANIFEST_DIR") else {
        return;
    };
    let root = Path::new(&manifest_dir).join("..");
    if DOCS.iter().all(|doc| root.join(doc).is_file()) {
        for doc in DOCS {
            println!("cargo::rerun-if-changed=../{doc}");
        }
        println!("cargo::rustc-cfg=grace_repository_docs");
    }
}
