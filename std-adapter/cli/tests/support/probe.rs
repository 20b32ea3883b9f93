//! A probe of a real agent's runtime thread, for the CLI's tests that
//! run one (shared by `support` and the tests that include it alone).

use std::path::Path;

use grace_agent::api::{ApiError, Client, ClientError, ErrorKind, Request};

/// Whether the agent serving `data_dir` is through with its start
/// (adoption, reconciling what it found) and its runtime thread answers:
/// a delete of an object that does not exist goes through that thread
/// and comes back "not found", changing nothing. `false` while no agent
/// serves, or once its runtime thread has stopped.
pub fn runtime_answers(data_dir: &Path) -> bool {
    let Ok(mut client) = Client::connect(data_dir) else {
        return false;
    };
    let probe = Request::Delete {
        name: "grace-test-no-such-object".into(),
        options: grace_core::DeleteOptions::default(),
    };
    matches!(
        client.call(&probe),
        Err(ClientError::Api(ApiError {
            kind: ErrorKind::NotFound,
            ..
        }))
    )
}
