//! Runs the Worker controller against the cluster of the current
//! kubeconfig (build with `--features tls` for an https API server). The
//! workload only logs what it is told.

use std::sync::Arc;

use futures::StreamExt;
use grace_k8s_controller::{Context, Worker, Workload, error_policy, reconcile};
use kube::runtime::Controller;
use kube::runtime::watcher;
use kube::{Api, Client};

/// A workload that logs each step and stops when killed.
struct Logged;

impl Workload for Logged {
    fn pre_stop(&self, worker: &str, budget_seconds: i64) {
        println!("{worker}: pre-stop step (budget {budget_seconds} s)");
    }
    fn pre_stop_done(&self, _: &str) -> bool {
        true
    }
    fn stop(&self, worker: &str) {
        println!("{worker}: stop signal");
    }
    fn kill(&self, worker: &str) {
        println!("{worker}: SIGKILL");
    }
    fn stopped(&self, _: &str) -> bool {
        false
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), kube::Error> {
    let client = Client::try_default().await?;
    let workers: Api<Worker> = Api::all(client.clone());
    let context = Arc::new(Context {
        client,
        workload: Logged,
        now_millis: Box::new(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        }),
    });
    Controller::new(workers, watcher::Config::default())
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(e) = result {
                eprintln!("reconcile: {e}");
            }
        })
        .await;
    Ok(())
}
