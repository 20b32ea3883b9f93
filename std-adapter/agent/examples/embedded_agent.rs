//! A node agent inside your own program: started on a data directory,
//! talked to through its socket, stopped when the program is done.
//!
//! It applies a pod whose container is a real `sleep`, deletes it with a
//! grace of 30 s (the stop signal ends `sleep` at once), waits until the
//! watch says it is gone, and stops the agent.
//!
//! ```text
//! cargo run -p grace-agent --example embedded_agent -- /tmp/grace-embedded
//! ```

use std::error::Error;
use std::path::Path;

use grace_agent::api::{Client, Merge, Reply, Request};
use grace_agent::{Agent, AgentOptions};
use grace_core::{DeleteOptions, Record};
use grace_std::store::{ContainerStatus, EventKind, StoredContainer, StoredObject};

fn main() -> Result<(), Box<dyn Error>> {
    // The agent only emits its log (`tracing` events): printed here on
    // standard error, at info and above.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
        .init();
    let dir = std::env::args_os()
        .nth(1)
        .ok_or("usage: embedded_agent DATA_DIR")?;
    run(Path::new(&dir), &["sleep", "600"], |pod| {
        println!("{pod} runs");
    })
}

/// Runs an agent on `data_dir`, applies the pod `web` running `command` on
/// it (calling `on_running` once its container runs), deletes it, waits
/// until it is gone and stops the agent.
pub fn run(
    data_dir: &Path,
    command: &[&str],
    mut on_running: impl FnMut(&str),
) -> Result<(), Box<dyn Error>> {
    // The agent of the node `local` (its log goes to the subscriber).
    let agent = Agent::start(AgentOptions::new(data_dir))?;
    println!("agent serving {}", agent.socket().display());

    // A watch first, so that no change is missed.
    let mut watch = Client::connect(agent.data_dir())?;
    watch.send(&Request::Watch)?;
    let Reply::Objects { .. } = watch.next_reply()? else {
        return Err("the watch did not start with a listing".into());
    };

    // Apply: the agent starts the container before it answers.
    let mut client = Client::connect(agent.data_dir())?;
    let mut pod = StoredObject::on_node(
        Record::builder("").grace_period_seconds(30).build()?,
        "local",
    );
    pod.containers
        .push(StoredContainer::new("app", command.iter().copied()));
    let reply = client.call(&Request::Put {
        name: "web".into(),
        object: Box::new(pod),
        merge: Merge::ThreeWay,
    })?;
    println!("web: {reply:?}");
    let Reply::Objects { items, .. } = client.call(&Request::Get {
        name: Some("web".into()),
    })?
    else {
        return Err("get answered something else".into());
    };
    let runs = items.first().is_some_and(|i| {
        matches!(
            i.object.status.as_slice(),
            [ContainerStatus::Running { .. }]
        )
    });
    if !runs {
        return Err(format!("web does not run: {items:?}").into());
    }
    on_running("web");

    // Delete: the stop signal now, SIGKILL in 30 s if it were still there.
    client.call(&Request::Delete {
        name: "web".into(),
        options: DeleteOptions::with_grace(30),
    })?;
    loop {
        match watch.next_reply()? {
            Reply::Event(e) if e.name == "web" && e.kind == EventKind::Deleted => break,
            Reply::Event(_) => {}
            other => return Err(format!("the watch answered {other:?}").into()),
        }
    }
    println!("web is gone");

    agent.shutdown();
    agent.join()?;
    println!("agent stopped");
    Ok(())
}
