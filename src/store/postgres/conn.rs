//! A connection with its prepared statements kept: each SQL text is
//! prepared once per connection (one round trip) and then only executed,
//! instead of prepared again on every call as a `&str` query is. The
//! writer keeps its own cache (cleared with its connection); a pooled
//! connection has the pool's.

use std::collections::HashMap;

use parking_lot::Mutex;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Error, Row, Statement};

/// The statements prepared on one connection, by SQL text.
#[derive(Default)]
pub(super) struct Statements(Mutex<HashMap<String, Statement>>);

impl Statements {
    pub(super) fn clear(&self) {
        self.0.lock().clear();
    }
}

#[derive(Clone, Copy)]
enum Cache<'a> {
    Own(&'a Statements),
    Pool(&'a deadpool_postgres::StatementCache),
}

/// A connection and where its prepared statements are kept.
#[derive(Clone, Copy)]
pub(super) struct Conn<'a> {
    client: &'a Client,
    cache: Cache<'a>,
}

impl<'a> Conn<'a> {
    pub(super) fn new(client: &'a Client, statements: &'a Statements) -> Self {
        Self {
            client,
            cache: Cache::Own(statements),
        }
    }

    pub(super) fn pooled(object: &'a deadpool_postgres::Object) -> Self {
        Self {
            client: object,
            cache: Cache::Pool(&object.statement_cache),
        }
    }

    async fn statement(&self, sql: &str) -> Result<Statement, Error> {
        match self.cache {
            Cache::Pool(cache) => cache.prepare(self.client, sql).await,
            Cache::Own(statements) => {
                let known = statements.0.lock().get(sql).cloned();
                if let Some(statement) = known {
                    return Ok(statement);
                }
                let statement = self.client.prepare(sql).await?;
                statements
                    .0
                    .lock()
                    .insert(sql.to_owned(), statement.clone());
                Ok(statement)
            }
        }
    }

    pub(super) async fn execute(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, Error> {
        let statement = self.statement(sql).await?;
        self.client.execute(&statement, params).await
    }

    pub(super) async fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, Error> {
        let statement = self.statement(sql).await?;
        self.client.query(&statement, params).await
    }

    pub(super) async fn query_one(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, Error> {
        let statement = self.statement(sql).await?;
        self.client.query_one(&statement, params).await
    }

    pub(super) async fn query_opt(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, Error> {
        let statement = self.statement(sql).await?;
        self.client.query_opt(&statement, params).await
    }

    /// Statements without parameters, as one simple query (transactions,
    /// savepoints).
    pub(super) async fn batch_execute(&self, sql: &str) -> Result<(), Error> {
        self.client.batch_execute(sql).await
    }
}
