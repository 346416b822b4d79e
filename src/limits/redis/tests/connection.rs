//! Reaching the server: bad URLs, an unreachable server, passwords (never shown), TLS with the
//! client's settings, a forked child's own connection.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{free_port, multi_thread, redis_binary, store, Server, NAMESPACE};
use crate::error::Error;
use crate::limits::redis::RedisLimits;
use crate::limits::{LimitsStore, Scope, Slot};
#[test]
fn an_unreachable_store_fails_with_its_name_and_no_password() {
    // Nothing listens on this port: no server is needed.
    let port = free_port();
    let url = format!("redis://user:s3cr3t-pw@127.0.0.1:{port}/0?wait=1");
    let store = store(&url);
    let runtime = multi_thread();
    runtime.block_on(async {
        let error = store.check().await.unwrap_err();
        let text = error.to_string();
        assert!(matches!(error, Error::SharedState(_)), "{error:?}");
        assert!(!text.contains("s3cr3t"), "{text}");
        assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
        assert!(!format!("{store:?}").contains("s3cr3t"));

        // admit retries for wait= (1 s), then fails the same way.
        let started = Instant::now();
        let slot = Slot {
            sender: Some(("15550010", 10.0)),
            campaign: None,
        };
        let error = store.admit(slot, None).await.unwrap_err();
        assert!(matches!(error, Error::SharedState(_)), "{error:?}");
        assert!(!error.to_string().contains("s3cr3t"));
        assert!(started.elapsed() >= Duration::from_millis(900));
        // A deadline shorter than wait=: a timeout.
        let deadline = Instant::now() + Duration::from_millis(300);
        let error = store.admit(slot, Some(deadline)).await.unwrap_err();
        assert!(matches!(error, Error::Timeout(_)), "{error:?}");

        // Many callers waiting on one pace fail together with the one asking the store (not
        // each after the others' wait=).
        let started = Instant::now();
        let callers: Vec<_> = (0..8)
            .map(|_| {
                let store = Arc::clone(&store);
                tokio::spawn(async move { store.admit(slot, None).await })
            })
            .collect();
        for caller in callers {
            let error = caller.await.unwrap().unwrap_err();
            assert!(matches!(error, Error::SharedState(_)), "{error:?}");
        }
        eprintln!("8 callers failed after {:?} (wait=1)", started.elapsed());
    });
}

#[test]
fn bad_urls_are_validation_errors() {
    for url in [
        "http://localhost:6379",
        "redis://:pw@localhost:6379/zero",
        "redis://localhost:6379/0?timeout=3",
        "rediss://localhost:6379/0?clock=atomic",
    ] {
        let error = crate::limits::shared(url, NAMESPACE, None).err().unwrap();
        assert!(
            matches!(&error, Error::Validation { field, .. } if field == "shared_limits"),
            "{url}: {error:?}"
        );
    }
    // rediss:// needs the client's TLS settings (a client always passes them).
    assert!(crate::limits::shared("rediss://localhost", NAMESPACE, None).is_err());
}

#[test]
fn a_password_is_used_and_never_shown() {
    let Some(server) = Server::start(&["--requirepass", "s3cr:t@x"]) else {
        return;
    };
    let runtime = multi_thread();
    runtime.block_on(async {
        let good = store(&format!(
            "redis://:s3cr%3At%40x@127.0.0.1:{}/2",
            server.port
        ));
        good.check().await.unwrap();
        good.pause(Scope::Service, Duration::from_millis(1))
            .await
            .unwrap();
        let bad = store(&format!(
            "redis://:wr0ng-pw@127.0.0.1:{}/2?wait=1",
            server.port
        ));
        let error = bad.check().await.unwrap_err();
        assert!(matches!(error, Error::SharedState(_)), "{error:?}");
        assert!(!error.to_string().contains("wr0ng"), "{error}");
    });
}

#[test]
fn rediss_uses_the_clients_tls_settings() {
    let Some(openssl) = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("openssl"))
            .find(|candidate| candidate.is_file())
    }) else {
        eprintln!("skipped: no openssl to make a test certificate");
        return;
    };
    if redis_binary().is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("bizmsg-redis-tls-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    make_certificates(&openssl, &dir);
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let (cert, key, ca) = (path("server.pem"), path("server.key"), path("ca.pem"));
    let Some(server) = Server::start(&[
        "--tls-port",
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &ca,
        "--tls-auth-clients",
        "no",
    ]) else {
        return;
    };
    let trusted = tls_trusting(Some(&dir.join("ca.pem")));
    let runtime = multi_thread();
    runtime.block_on(async {
        let url = format!("rediss://localhost:{}/0", server.port);
        let store = RedisLimits::new(&url, NAMESPACE, Some(Arc::new(trusted))).unwrap();
        store.check().await.unwrap();
        let slot = Slot {
            sender: Some(("15550011", 100.0)),
            campaign: None,
        };
        store.admit(slot, None).await.unwrap();
        // A client that does not trust the test CA is refused.
        let untrusted = tls_trusting(None);
        let store = RedisLimits::new(
            &format!("{url}?wait=1"),
            NAMESPACE,
            Some(Arc::new(untrusted)),
        )
        .unwrap();
        let error = store.check().await.unwrap_err();
        assert!(matches!(error, Error::SharedState(_)), "{error:?}");
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// A rustls configuration trusting the CA at `ca` only (or nothing).
fn tls_trusting(ca: Option<&Path>) -> rustls::ClientConfig {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    if let Some(ca) = ca {
        roots
            .add(rustls::pki_types::CertificateDer::from_pem_file(ca).unwrap())
            .unwrap();
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// A CA and a server certificate for `localhost` signed by it.
fn make_certificates(openssl: &Path, dir: &Path) {
    let run = |args: &[&str]| {
        let status = Command::new(openssl)
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "openssl {args:?}");
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=bizmsg test CA",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
    ]);
    std::fs::write(
        dir.join("ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "ext",
        "-out",
        "server.pem",
    ]);
}

#[cfg(unix)]
#[test]
fn a_forked_child_makes_its_own_connection() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let store = store(&server.url());
    let slot = Slot {
        sender: Some(("15550012", 100.0)),
        campaign: None,
    };
    let current = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    };
    current().block_on(store.admit(slot, None)).unwrap();
    // SAFETY: the child only runs this test's code (its own runtime and the store), then
    // leaves with _exit; an alarm ends it should anything inherited block.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        unsafe { libc::alarm(20) };
        let ok = current().block_on(async {
            store.admit(slot, None).await.is_ok()
                && store
                    .pause(Scope::Sender("15550013"), Duration::from_millis(1))
                    .await
                    .is_ok()
                && store.check().await.is_ok()
        });
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{status}"
    );
    // The parent's connection is untouched by the child (which used one of its own).
    current().block_on(store.admit(slot, None)).unwrap();
    current().block_on(store.check()).unwrap();
}
