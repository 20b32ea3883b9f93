//! `GET …/pods/NAME/log`: a container's output as the agent keeps it
//! (`<data-dir>/logs`, the files `grace logs` reads, records in the
//! kubelet's CRI format: `grace_std::process::logs::cri`): `container`,
//! `tailLines`, `limitBytes`, `timestamps`, `sinceSeconds`, `sinceTime`,
//! `follow` (until the pod is removed or the client hangs up), and
//! `previous`: the output of the container's run before its last restart,
//! which the agent keeps as the kubelet keeps one previous instance (a 400
//! in kubectl's words for a container never restarted).

use std::time::{Duration, SystemTime};

use bytes::Bytes;

use super::pods::Query;
use super::status::Status;
use super::{Answer, Context};
use crate::api::items;
use crate::process::logs::cri::{Decoder, LogLine, LogTime};
use crate::process::logs::{ContainerLogs, LogFollower};
use crate::store::Store;

/// How often a follow looks for new output.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// The log of a container of `name`.
pub(crate) fn log(ctx: &std::sync::Arc<Context>, name: &str, query: &Query) -> Answer {
    let object = match items(&*ctx.store, Some(name)) {
        Ok((_, found)) => match found.into_iter().next() {
            Some(item) => item.object,
            None => return Answer::Failed(Status::pod_not_found(name)),
        },
        Err(_) => return Answer::Failed(Status::pod_not_found(name)),
    };
    let names: Vec<&str> = object.containers.iter().map(|c| c.name.as_str()).collect();
    let index = match query.get("container") {
        Some(c) => names.iter().position(|n| n == c),
        None if names.len() == 1 => Some(0),
        None => None,
    };
    let Some(index) = index else {
        return Answer::Failed(Status::bad_request(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            names.join(" ")
        )));
    };
    let container = names.get(index).copied().unwrap_or_default().to_owned();
    let previous = query.get("previous").map(String::as_str) == Some("true");
    let current = if previous {
        let restarted = object.restarts.get(index).is_some_and(|r| r.count > 0);
        match ctx.logs.previous_file(name, &object, index) {
            Some(file) if restarted && !ContainerLogs::files(&file).is_empty() => Some(file),
            _ => {
                return Answer::Failed(Status::bad_request(format!(
                    "previous terminated container \"{container}\" in pod \"{name}\" not found"
                )));
            }
        }
    } else {
        ctx.logs.file(name, &object, index)
    };
    let Some(current) = current else {
        return Answer::Failed(Status::pod_not_found(name));
    };
    // A previous run's output is whole: there is nothing to follow.
    let follow_asked = query.get("follow").map(String::as_str) == Some("true");
    let since = match (query.get("sinceSeconds"), query.get("sinceTime")) {
        (Some(_), Some(_)) => {
            return Answer::Failed(Status::bad_request(
                "at most one of `sinceTime` or `sinceSeconds` may be specified".to_owned(),
            ));
        }
        (Some(secs), None) => match secs.parse::<u64>() {
            Ok(secs) if secs > 0 => {
                Some(LogTime::of(SystemTime::now()).minus(Duration::from_secs(secs)))
            }
            _ => {
                return Answer::Failed(Status::bad_request(
                    "sinceSeconds: must be greater than 0".to_owned(),
                ));
            }
        },
        (None, Some(time)) => match LogTime::parse(time) {
            Some(t) => Some(t),
            None => {
                return Answer::Failed(Status::bad_request(format!(
                    "sinceTime: \"{time}\" is not an RFC 3339 time"
                )));
            }
        },
        (None, None) => None,
    };
    let timestamps = query.get("timestamps").map(String::as_str) == Some("true");
    let follow = follow_asked && !previous;
    let mut decoder = Decoder::new();
    let mut lines = Vec::new();
    for copy in ContainerLogs::files(&current)
        .iter()
        .filter(|f| **f != current)
    {
        if let Ok(bytes) = std::fs::read(copy) {
            lines.append(&mut decoder.feed(&bytes));
        }
    }
    let mut follower = LogFollower::open(&current).ok();
    if let Some(bytes) = follower.as_mut().and_then(|f| f.read_new().ok()) {
        lines.append(&mut decoder.feed(&bytes));
    }
    if !follow {
        lines.append(&mut decoder.finish());
    }
    if let Some(since) = since {
        lines.retain(|l| l.time.is_some_and(|t| t >= since));
    }
    if let Some(n) = query.get("tailLines").and_then(|n| n.parse::<usize>().ok()) {
        let _ = lines.drain(..lines.len().saturating_sub(n));
    }
    let mut shown = render(&lines, timestamps);
    if let Some(limit) = query
        .get("limitBytes")
        .and_then(|n| n.parse::<usize>().ok())
    {
        shown.truncate(limit);
    }
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let ctx = std::sync::Arc::clone(ctx);
    let (name, uid) = (name.to_owned(), object.uid().to_owned());
    let stream = move || {
        if !shown.is_empty() && tx.blocking_send(Bytes::from(shown)).is_err() {
            return;
        }
        while follow && !tx.is_closed() {
            std::thread::sleep(FOLLOW_POLL);
            if follower.is_none() {
                follower = LogFollower::open(&current).ok();
            }
            let lines = follower
                .as_mut()
                .and_then(|f| f.read_new().ok())
                .map(|bytes| decoder.feed(&bytes))
                .unwrap_or_default();
            let bytes = render(&lines, timestamps);
            if !bytes.is_empty() && tx.blocking_send(Bytes::from(bytes)).is_err() {
                return;
            }
            let there = ctx
                .store
                .get(&name)
                .ok()
                .flatten()
                .is_some_and(|(o, _)| o.uid() == uid);
            if !there {
                return;
            }
        }
    };
    match std::thread::Builder::new()
        .name("grace-k8s-logs".into())
        .spawn(stream)
    {
        Ok(_) => Answer::Stream(rx, "text/plain"),
        Err(e) => Answer::Failed(super::no_thread(&e)),
    }
}

/// Lines as the kubelet serves them: with `timestamps`, each begins with
/// its time (RFC 3339 with nanoseconds) and a space.
fn render(lines: &[LogLine], timestamps: bool) -> Vec<u8> {
    let mut text = Vec::new();
    for line in lines {
        if timestamps && let Some(time) = line.time {
            text.extend_from_slice(time.rfc3339_nanos().as_bytes());
            text.push(b' ');
        }
        text.extend_from_slice(&line.text);
    }
    text
}
