//! The `request_parse` target: the agent's request reader
//! (`grace_agent::api::read_request`) on any byte stream, against a plain
//! model of the protocol (split at newlines; a line longer than the limit
//! ends the stream; any other line parses or is malformed, alone).
//!
//! The first byte picks the line limit (tiny limits reach the "too long"
//! path with short inputs; 255 is the agent's own), the second the
//! reader's buffer size (1 to 16 bytes: lines cross buffer refills at
//! every offset). Every request read must survive a round trip through
//! its JSON form unchanged.
//!
//! Every request read then goes through the agent's one validation
//! (`grace_agent::validate::request`), which must not panic; an object it
//! accepts must hold what the agent relies on when it runs one (checked
//! here apart from the validation's own code) and must convert to the Pod
//! `grace get -o yaml` shows without a panic.

use std::io::{BufReader, Cursor};

use grace_agent::api::{BadRequest, MAX_REQUEST_BYTES, Request, parse_request, read_request};
use grace_std::store::StoredObject;

/// Runs one input; panics on a difference from the model.
pub fn run(data: &[u8]) {
    let [pick_limit, pick_buffer, stream @ ..] = data else {
        return;
    };
    let limit = match pick_limit {
        255 => MAX_REQUEST_BYTES,
        n => usize::from(*n),
    };
    let capacity = usize::from(pick_buffer % 16) + 1;
    let mut reader = BufReader::with_capacity(capacity, Cursor::new(stream));

    let mut expected = model(stream, limit).into_iter();
    let mut read = 0usize;
    while let Some(got) = read_request(&mut reader, limit) {
        read += 1;
        assert!(read <= stream.len() + 1, "more requests than lines");
        let want = expected
            .next()
            .expect("the model has a line for every read");
        assert_eq!(got, want, "line {read} (limit {limit}, buffer {capacity})");
        if let Ok(request) = &got {
            round_trip(request);
            validated(request);
        }
        if matches!(got, Err(BadRequest::TooLong { .. })) {
            // The connection ends there.
            return;
        }
    }
    assert!(expected.next().is_none(), "the reader stopped early");
}

/// What the reader must return, line by line.
fn model(stream: &[u8], limit: usize) -> Vec<Result<Request, BadRequest>> {
    let mut out = Vec::new();
    let mut rest = stream;
    while !rest.is_empty() {
        let (line, next) = match rest.iter().position(|&b| b == b'\n') {
            Some(end) => (&rest[..=end], &rest[end + 1..]),
            None => (rest, &rest[rest.len()..]),
        };
        let content = line.strip_suffix(b"\n").unwrap_or(line);
        if content.len() > limit {
            out.push(Err(BadRequest::TooLong { limit }));
            return out;
        }
        out.push(parse_request(line));
        rest = next;
    }
    out
}

fn round_trip(request: &Request) {
    let json = serde_json::to_vec(request).expect("a request serializes");
    let back = parse_request(&json).expect("its JSON parses");
    assert_eq!(
        &back,
        request,
        "round trip through {}",
        String::from_utf8_lossy(&json)
    );
}

/// The agent's validation on `request`; what it accepts is checked.
fn validated(request: &Request) {
    let verdict = grace_agent::validate::request(request);
    let (name, object, uid_required) = match request {
        Request::Apply { name, object } => (name, object, true),
        Request::Put { name, object, .. } => (name, object, false),
        Request::RemoveFinalizer { finalizer, .. } => {
            if verdict.is_ok() {
                assert!(!finalizer.is_empty(), "an empty finalizer accepted");
            }
            return;
        }
        Request::Delete { .. } | Request::Get { .. } | Request::Watch | Request::Status => {
            assert!(
                verdict.is_ok(),
                "nothing to refuse in {request:?}: {verdict:?}"
            );
            return;
        }
    };
    if let Err(e) = &verdict {
        assert!(!e.field.is_empty() && !e.message.is_empty(), "{e:?}");
        return;
    }
    runnable(name, object, uid_required);
    let _ = grace_k8s::pod_object::to_pod(name, object);
}

/// What the agent relies on in an object it stores and runs.
fn runnable(name: &str, object: &StoredObject, uid_required: bool) {
    let label = |s: &str| {
        (1..=63).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !s.starts_with('-')
            && !s.ends_with('-')
    };
    assert!(label(name), "name {name:?}");
    assert!(!uid_required || !object.uid().is_empty(), "no uid");
    assert!(object.agent.is_none(), "a kill state from a client");
    assert!(object.status.is_empty(), "statuses from a client");
    assert!(object.started.is_none(), "a start time from a client");
    assert!(
        object.record.deletion_timestamp.is_none(),
        "a deletion from a client"
    );
    assert!(
        object
            .record
            .termination_grace_period_seconds
            .is_none_or(|g| g >= 0),
        "a negative grace"
    );
    assert!(
        object.node.as_deref().is_none_or(label),
        "node {:?}",
        object.node
    );
    assert!(object.containers.len() <= grace_std::runtime::CONTAINERS);
    for (i, c) in object.containers.iter().enumerate() {
        assert!(label(&c.name), "container {i} name {:?}", c.name);
        assert!(
            object.containers[..i].iter().all(|o| o.name != c.name),
            "container {i}: a duplicate name"
        );
        let program = c.command.first().map(String::as_str);
        assert!(
            program.is_some_and(|p| !p.is_empty()),
            "container {i}: no program"
        );
        assert!(
            c.command.iter().all(|a| !a.contains('\0')),
            "container {i}: a NUL"
        );
        assert!(
            c.pre_stop
                .as_deref()
                .is_none_or(|h| !h.trim().is_empty() && !h.contains('\0')),
            "container {i}: an empty hook"
        );
        assert!(
            c.stop_signal.is_none_or(|n| (1..=64).contains(&n)),
            "container {i}: signal {:?}",
            c.stop_signal
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_and_edges_match_the_model() {
        run(b"\xff\x03{\"op\":\"get\",\"name\":null}\n{\"op\":\"watch\"}\n");
        run(b"\x05\x00toolongline\n{}\n");
        run(b"\x00\x07\n\n");
        run(b"\xff\x0f\xff\xfe garbage\n{\"op\":\"delete\",\"name\":\"a\",\"options\":{}}");
    }

    #[test]
    fn objects_are_validated_an_empty_command_refused() {
        for seed in ["apply_empty_command", "put_pod"] {
            let path = format!("{}/corpus/request_parse/{seed}", env!("CARGO_MANIFEST_DIR"));
            run(&std::fs::read(&path).expect("a seed"));
        }
        let line = std::fs::read(format!(
            "{}/corpus/request_parse/apply_empty_command",
            env!("CARGO_MANIFEST_DIR")
        ))
        .expect("a seed");
        let request = parse_request(&line[2..]).expect("a request");
        let e = grace_agent::validate::request(&request).expect_err("refused");
        assert_eq!(e.field, "spec.containers[0].command");
        let line = std::fs::read(format!(
            "{}/corpus/request_parse/put_pod",
            env!("CARGO_MANIFEST_DIR")
        ))
        .expect("a seed");
        let request = parse_request(&line[2..]).expect("a request");
        assert_eq!(grace_agent::validate::request(&request), Ok(()));
    }
}
