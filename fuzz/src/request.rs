//! The `request_parse` target: the agent's request reader
//! (`grace_std::api::read_request`) on any byte stream, against a plain
//! model of the protocol (split at newlines; a line longer than the limit
//! ends the stream; any other line parses or is malformed, alone).
//!
//! The first byte picks the line limit (tiny limits reach the "too long"
//! path with short inputs; 255 is the agent's own), the second the
//! reader's buffer size (1 to 16 bytes: lines cross buffer refills at
//! every offset). Every request read must survive a round trip through
//! its JSON form unchanged.

use std::io::{BufReader, Cursor};

use grace_std::api::{BadRequest, MAX_REQUEST_BYTES, Request, parse_request, read_request};

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
}
