//! The etcd store against an etcd as a deployment runs it: TLS only,
//! client certificates required, authentication on (see
//! `common/secure_etcd.rs`). A client lacking any of TLS, a certificate the
//! server trusts, or the user's password is refused at connect, before it
//! reads or writes anything; one with all of them works, leases and
//! fencing included. (The whole store suite runs on such a server too:
//! `store_suite.rs`, module `etcd_tls_auth`.)
// A test reports by failing: it may unwrap, panic, index and count as it
// likes (the workspace's restriction lints are for library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing
)]
#![cfg(feature = "etcd")]

#[path = "common/secure_etcd.rs"]
mod secure_etcd;

use std::time::Duration;

use grace_core::{Name, Record};
use grace_std::store::{
    EtcdAuth, EtcdOptions, EtcdStore, FINALIZERS, Store, StoreError, StoredObject,
};
use secure_etcd::{PASSWORD, SecureEtcd, USER};

fn refused(options: EtcdOptions) -> String {
    match EtcdStore::connect_with(options) {
        Ok(store) => panic!("connected, but must be refused: {store:?}"),
        Err(e) => {
            eprintln!("refused: {e}");
            e.to_string()
        }
    }
}

#[test]
#[ignore = "starts its own etcd with TLS and auth (GRACE_ETCD_BIN or etcd on PATH); .ci/etcd runs it"]
fn etcd_tls_auth_a_client_missing_tls_a_certificate_or_the_password_is_refused() {
    let server = SecureEtcd::start();
    let full = server.store_options("/grace-test/refusals/");

    // Plain HTTP to a TLS port.
    let plain = EtcdOptions {
        tls: None,
        endpoints: vec![format!("http://127.0.0.1:{}", server.port)],
        ..full.clone()
    };
    let e = refused(plain);
    assert!(!e.is_empty());

    // https without TLS options is caught before anything is sent.
    let e = refused(EtcdOptions {
        tls: None,
        ..full.clone()
    });
    assert!(e.contains("--etcd-cacert"), "{e}");

    // TLS without a client certificate, or with one from another CA.
    let e = refused(EtcdOptions {
        tls: Some(grace_std::store::EtcdTls {
            identity: None,
            ..server.store_tls(&server.certs.client_cert, &server.certs.client_key)
        }),
        ..full.clone()
    });
    assert!(!e.is_empty());
    let e = refused(EtcdOptions {
        tls: Some(server.store_tls(&server.certs.stranger_cert, &server.certs.stranger_key)),
        ..full.clone()
    });
    assert!(!e.is_empty());

    // TLS and a certificate, but no user, or a wrong password.
    let e = refused(EtcdOptions {
        auth: None,
        ..full.clone()
    });
    assert!(e.contains("etcd refused the request"), "{e}");
    let e = refused(EtcdOptions {
        auth: Some(EtcdAuth {
            user: USER.into(),
            password: "not the password".into(),
        }),
        ..full.clone()
    });
    assert!(e.contains("authentication failed"), "{e}");

    // Everything: served.
    let store = EtcdStore::connect_with(full).expect("served");
    let uid = Name::try_from("uid-1").expect("short");
    store
        .create(
            "web",
            StoredObject::unscheduled(Record::<FINALIZERS>::new(uid)),
        )
        .expect("written");
    assert!(store.get("web").expect("read").is_some());
    // The password stays out of what the store prints.
    assert!(!format!("{store:?}").contains(PASSWORD));
}

#[test]
#[ignore = "starts its own etcd with TLS and auth (GRACE_ETCD_BIN or etcd on PATH); .ci/etcd runs it"]
fn etcd_tls_auth_the_user_is_kept_to_its_prefix_and_leases_and_fencing_work() {
    let server = SecureEtcd::start();
    // Outside the keys its role grants: refused.
    let e = refused(server.store_options("/elsewhere/"));
    assert!(e.contains("permission denied"), "{e}");

    let store =
        EtcdStore::connect_with(server.store_options("/grace-test/agents/")).expect("served");
    let lease = store.grant_lease(Duration::from_secs(10)).expect("lease");
    store.register_node("node-a", lease).expect("registered");
    assert_eq!(
        store.alive_nodes().expect("listed"),
        vec!["node-a".to_owned()]
    );
    let epoch = store.fencing_epoch("node-a").expect("epoch");
    let guarded = store.with_fencing("node-a", epoch);
    let uid = Name::try_from("uid-1").expect("short");
    guarded
        .create(
            "web",
            StoredObject::unscheduled(Record::<FINALIZERS>::new(uid)),
        )
        .expect("written before the fencing");
    let _ = store.bump_fencing_epoch("node-a", epoch).expect("fenced");
    let uid = Name::try_from("uid-2").expect("short");
    let e = guarded
        .create(
            "api",
            StoredObject::unscheduled(Record::<FINALIZERS>::new(uid)),
        )
        .expect_err("refused after the fencing");
    assert!(matches!(e, StoreError::Fenced { .. }), "{e}");
    store.revoke_lease(lease).expect("revoked");
}

#[test]
#[ignore = "starts its own etcd with TLS and auth (GRACE_ETCD_BIN or etcd on PATH); .ci/etcd runs it"]
fn etcd_tls_auth_an_expired_token_is_renewed_with_the_password() {
    // Tokens that expire one second after their last use.
    let server = SecureEtcd::start_with(&["--auth-token-ttl", "1"]);
    let store =
        EtcdStore::connect_with(server.store_options("/grace-test/tokens/")).expect("served");
    let uid = Name::try_from("uid-1").expect("short");
    store
        .create(
            "web",
            StoredObject::unscheduled(Record::<FINALIZERS>::new(uid)),
        )
        .expect("written");
    // Not a wait for readiness: the token expires meanwhile.
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        store
            .get("web")
            .expect("served with a fresh token")
            .is_some(),
        "the object is there"
    );
}
