//! A run is one server session: its advisory lock is its liveness, and its settings and prepared
//! statements are its session's. Which server process a connection reaches, read at open and at
//! every transaction, and what a run is told when its statements reach two.

use tokio_postgres::Client;

use crate::error::Error;

/// The server process of the connection's session.
pub(super) async fn backend_pid(
    client: &Client,
) -> std::result::Result<i32, tokio_postgres::Error> {
    // A simple query: no statement prepared on one session and run on another.
    let answer = client.simple_query("SELECT pg_backend_pid()").await?;
    Ok(answer
        .iter()
        .find_map(|message| match message {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0)?.parse().ok(),
            _ => None,
        })
        .unwrap_or_default())
}

/// What a run is told when its statements reach more than one server session: a pooler in
/// transaction or statement mode (PgBouncer) sits between it and PostgreSQL. A run is one
/// session: its lock is its liveness, and its settings and prepared statements are the
/// session's. Through such a pool a dead run would look alive, and its settings would leak to
/// the pool's other clients.
pub(super) fn pooled(name: &str, first: i32, then: i32) -> Error {
    Error::SharedState(format!(
        "journal {name}: its statements reached two PostgreSQL sessions (server processes \
         {first} and {then}): a connection pooler in transaction or statement mode (PgBouncer's \
         pool_mode = transaction) is between bizmsg and PostgreSQL. The journal needs one \
         session per run: connect to PostgreSQL directly, or through a pool in session mode"
    ))
}
