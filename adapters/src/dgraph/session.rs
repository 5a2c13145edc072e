//! The Dgraph test-client session: each step as DQL queries and JSON mutations over HTTP in
//! one transaction, recording its `start_ts` and `commit_ts` ([`DgraphTxnFacts`]).
//!
//! Dgraph has no `BEGIN`: the first `/query` or `/mutate` of an attempt starts the
//! transaction and answers its `start_ts`; every later request names it (`?startTs=N`); the
//! conflict `keys` and `preds` of every mutation answer are kept and sent to `/commit`. A
//! transaction that mutated nothing is not sent to `/commit` (as Dgraph's own clients do):
//! it read one snapshot and has nothing to commit.
//!
//! Writes look the key's node up first (a query in the transaction, through the `@upsert`
//! index of the key predicate, so that two transactions creating one key conflict), then
//! set or delete that node's predicates: the step's answer is exactly what Dgraph held at the
//! transaction's snapshot plus its own writes.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use isocert_history::AggregateFn;
use isocert_recovery::DgraphTxnFacts;
use serde::Serialize;
use serde_json::Value as Json;

use super::dql::{self, Node};
use super::filter::{self, Filter};
use super::http::{db_error, Answer, DgraphHttp};
use crate::seam::{
    CommitOutcome, Database, DbError, ErrorClass, IntOp, IntStep, IsolationLevel, RecordedOp, Session, Step,
    TableSpec,
};
use crate::Dgraph;

/// What a Dgraph session records per operation: nothing (every read is at the
/// transaction's `start_ts`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DgraphOpFacts {}

/// The open transaction's state, as Dgraph's HTTP clients keep it.
#[derive(Debug, Default)]
struct OpenTxn {
    start_ts: Option<u64>,
    keys: BTreeSet<String>,
    preds: BTreeSet<String>,
}

/// The open transaction (`start_ts`) of each session by its id, so that
/// [`Database::kill_session`](crate::Database::kill_session) can abort it.
pub(crate) type OpenTxns = Arc<Mutex<FxHashMap<u64, u64>>>;

/// One test-client "connection" to Dgraph: HTTP is connectionless, so it is a transaction
/// state over a shared client.
#[derive(Debug)]
pub struct DgraphSession {
    http: DgraphHttp,
    id: u64,
    txn: OpenTxn,
    open: OpenTxns,
}

impl DgraphSession {
    /// A session over `http`, numbered `id` (its [`Session::server_id`]), registering its
    /// open transaction in `open`.
    pub(crate) fn new(http: DgraphHttp, id: u64, open: OpenTxns) -> Self {
        DgraphSession { http, id, txn: OpenTxn::default(), open }
    }

    /// Ends the open transaction's state, unregistering it.
    fn take_txn(&mut self) -> OpenTxn {
        if let Ok(mut open) = self.open.lock() {
            open.remove(&self.id);
        }
        std::mem::take(&mut self.txn)
    }

    /// Takes in an answer's transaction context: the start timestamp of the first request,
    /// the conflict keys and predicates of mutations.
    fn absorb(&mut self, answer: &Answer, facts: &mut DgraphTxnFacts, context: &str) -> Result<(), DbError> {
        let ts = answer.txn.start_ts;
        match self.txn.start_ts {
            None if ts > 0 => {
                self.txn.start_ts = Some(ts);
                facts.start_ts = Some(ts);
                if let Ok(mut open) = self.open.lock() {
                    open.insert(self.id, ts);
                }
            }
            None => {
                return Err(DbError::unexpected(context, "the answer has no extensions.txn.start_ts"));
            }
            Some(mine) if ts != 0 && ts != mine => {
                return Err(DbError::unexpected(
                    context,
                    format!("the answer names transaction start_ts {ts}, this one is {mine}"),
                ));
            }
            Some(_) => {}
        }
        if answer.txn.aborted {
            return Err(DbError::new(
                ErrorClass::Retryable,
                Some("aborted".into()),
                context,
                "Dgraph reports the transaction aborted",
            ));
        }
        self.txn.keys.extend(answer.txn.keys.iter().cloned());
        self.txn.preds.extend(answer.txn.preds.iter().cloned());
        Ok(())
    }

    async fn query(&mut self, dql: &str, facts: &mut DgraphTxnFacts) -> Result<Json, DbError> {
        let answer = self.http.query(self.txn.start_ts, dql).await.map_err(|e| db_error(dql, e))?;
        self.absorb(&answer, facts, dql)?;
        Ok(answer.data)
    }

    async fn nodes(
        &mut self,
        table: &TableSpec,
        dql: &str,
        facts: &mut DgraphTxnFacts,
    ) -> Result<Vec<Node>, DbError> {
        let data = self.query(dql, facts).await?;
        dql::parse_nodes(table, &data).map_err(|e| DbError::unexpected(dql, e))
    }

    /// The node of `key`, if any (two nodes for one key would break the adapter's model).
    async fn node_of(
        &mut self,
        table: &TableSpec,
        key: i64,
        facts: &mut DgraphTxnFacts,
    ) -> Result<Option<Node>, DbError> {
        let dql = dql::key_query(table, key);
        let mut nodes = self.nodes(table, &dql, facts).await?;
        match nodes.len() {
            0 | 1 => Ok(nodes.pop()),
            n => Err(DbError::unexpected(
                &dql,
                format!("{n} nodes hold key {key} of {}: was the table written outside isocert?", table.name),
            )),
        }
    }

    async fn mutate(&mut self, mutation: &Json, facts: &mut DgraphTxnFacts) -> Result<(), DbError> {
        let context = format!("mutation {mutation}");
        let answer =
            self.http.mutate(self.txn.start_ts, mutation, false).await.map_err(|e| db_error(&context, e))?;
        self.absorb(&answer, facts, &context)
    }

    async fn matching(
        &mut self,
        table: &TableSpec,
        predicate: &str,
        facts: &mut DgraphTxnFacts,
    ) -> Result<(String, Vec<Node>), DbError> {
        let filter: Filter = filter::parse_filter(table, predicate)
            .map_err(|e| DbError::new(ErrorClass::Fatal, None, format!("predicate {predicate}"), e))?;
        let text = filter.render(&|c| c.to_string());
        let nodes = self.nodes(table, &dql::filter_query(table, Some(&filter)), facts).await?;
        Ok((text, nodes))
    }

    async fn step(
        &mut self,
        table: &TableSpec,
        step: &IntStep,
        facts: &mut DgraphTxnFacts,
    ) -> Result<Vec<IntOp>, DbError> {
        Ok(match step {
            IntStep::Read { key } => {
                let node = self.node_of(table, *key, facts).await?;
                vec![IntOp::Read { key: *key, row: node.map(|n| n.row) }]
            }
            IntStep::Upsert { row } => {
                let node = self.node_of(table, row[0], facts).await?;
                let set = dql::set_row(table, node.as_ref().map(|n| n.uid.as_str()), row);
                self.mutate(&dql::set_mutation(vec![set]), facts).await?;
                vec![IntOp::Write { key: row[0], row: Some(row.clone()) }]
            }
            IntStep::Insert { row } => {
                if self.node_of(table, row[0], facts).await?.is_some() {
                    return Err(DbError::new(
                        ErrorClass::Fatal,
                        Some("duplicate-key".into()),
                        format!("inserting key {} into {}", row[0], table.name),
                        "the key exists",
                    ));
                }
                self.mutate(&dql::set_mutation(vec![dql::set_row(table, None, row)]), facts).await?;
                vec![IntOp::Write { key: row[0], row: Some(row.clone()) }]
            }
            IntStep::Update { row } => match self.node_of(table, row[0], facts).await? {
                None => Vec::new(),
                Some(node) => {
                    self.mutate(&dql::set_mutation(vec![dql::set_row(table, Some(&node.uid), row)]), facts)
                        .await?;
                    vec![IntOp::Write { key: row[0], row: Some(row.clone()) }]
                }
            },
            IntStep::Delete { key } => match self.node_of(table, *key, facts).await? {
                None => Vec::new(),
                Some(node) => {
                    self.mutate(&dql::delete_mutation(vec![dql::delete_node(table, &node.uid)]), facts)
                        .await?;
                    vec![IntOp::Write { key: *key, row: None }]
                }
            },
            IntStep::Select { predicate } => {
                let (predicate, nodes) = self.matching(table, predicate, facts).await?;
                vec![IntOp::Select { predicate, rows: nodes.into_iter().map(|n| n.row).collect() }]
            }
            IntStep::PredicateUpdate { predicate, set } => {
                let (predicate, nodes) = self.matching(table, predicate, facts).await?;
                let mut rows = Vec::with_capacity(nodes.len());
                let mut mutations = Vec::with_capacity(nodes.len());
                for node in nodes {
                    let mut row = node.row;
                    for (column, value) in set {
                        let i = table.columns.iter().position(|c| c == column).ok_or_else(|| {
                            DbError::new(
                                ErrorClass::Fatal,
                                None,
                                format!("SET {column}"),
                                "not a column of the table",
                            )
                        })?;
                        row[i] = *value;
                    }
                    mutations.push(dql::set_row(table, Some(&node.uid), &row));
                    rows.push(row);
                }
                if !mutations.is_empty() {
                    self.mutate(&dql::set_mutation(mutations), facts).await?;
                }
                vec![IntOp::Update { predicate, set: set.clone(), rows }]
            }
            IntStep::PredicateDelete { predicate } => {
                let (predicate, nodes) = self.matching(table, predicate, facts).await?;
                if !nodes.is_empty() {
                    let deletes = nodes.iter().map(|n| dql::delete_node(table, &n.uid)).collect();
                    self.mutate(&dql::delete_mutation(deletes), facts).await?;
                }
                vec![IntOp::Delete { predicate, keys: nodes.into_iter().map(|n| n.row[0]).collect() }]
            }
            IntStep::Statement { .. } => return Err(DbError::unexpected(
                "a step",
                "a scenario's own SQL statement: this database's adapter records the workload's steps only",
            )),
            IntStep::Append { .. } => return Err(crate::seam::append_unsupported("Dgraph")),
            IntStep::Aggregate { predicate, function, column } => {
                let (predicate, nodes) = self.matching(table, predicate, facts).await?;
                let i = table.columns.iter().position(|c| c == column).ok_or_else(|| {
                    DbError::new(
                        ErrorClass::Fatal,
                        None,
                        format!("aggregate of {column}"),
                        "not a column of the table",
                    )
                })?;
                let result = aggregate(*function, nodes.iter().map(|n| n.row[i])).map_err(|e| {
                    DbError::new(ErrorClass::Fatal, None, format!("{function:?}({column})"), e)
                })?;
                vec![IntOp::Aggregate { predicate, function: *function, column, result }]
            }
        })
    }
}

/// The aggregate of the matching rows' values, computed from the rows Dgraph returned at
/// the snapshot (SQL's results: `None` for min/max/sum of nothing, count 0).
fn aggregate(function: AggregateFn, values: impl Iterator<Item = i64>) -> Result<Option<i64>, String> {
    let values: Vec<i64> = values.collect();
    Ok(match function {
        AggregateFn::Min => values.iter().copied().min(),
        AggregateFn::Max => values.iter().copied().max(),
        AggregateFn::Count => Some(values.len() as i64),
        AggregateFn::Sum if values.is_empty() => None,
        AggregateFn::Sum => {
            Some(values.iter().try_fold(0i64, |a, &v| a.checked_add(v)).ok_or("the sum overflows 64 bits")?)
        }
    })
}

impl Session for DgraphSession {
    type TxnFacts = DgraphTxnFacts;
    type OpFacts = DgraphOpFacts;

    fn server_id(&self) -> u64 {
        self.id
    }

    async fn begin(&mut self, level: IsolationLevel) -> Result<DgraphTxnFacts, DbError> {
        if !Dgraph::RUN_LEVELS.contains(&level) {
            return Err(DbError::new(
                ErrorClass::Fatal,
                None,
                "starting a transaction",
                format!(
                    "Dgraph runs every transaction at snapshot isolation and has no {level} level: run \
                     --isolation repeatable-read (checked as snapshot isolation; `isocert check --level serializable` \
                     then asks whether the history is also serializable)"
                ),
            ));
        }
        self.take_txn();
        Ok(DgraphTxnFacts { isolation: level.as_str().to_string(), ..DgraphTxnFacts::default() })
    }

    async fn execute(
        &mut self,
        table: &TableSpec,
        step: &Step,
        facts: &mut DgraphTxnFacts,
    ) -> Result<Vec<(RecordedOp, DgraphOpFacts)>, DbError> {
        let ops = self.step(table, &step.integers()?, facts).await?;
        Ok(ops.into_iter().map(|op| (RecordedOp::from(op), DgraphOpFacts {})).collect())
    }

    async fn execute_sql(&mut self, sql: &str) -> Result<(), DbError> {
        Err(DbError::new(
            ErrorClass::Fatal,
            None,
            isocert_history::quote_capped(sql),
            "Dgraph does not speak SQL: SQL scenarios cannot run on it",
        ))
    }

    async fn commit(&mut self, facts: &mut DgraphTxnFacts) -> CommitOutcome {
        let txn = self.take_txn();
        let Some(start_ts) = txn.start_ts.filter(|_| !txn.keys.is_empty() || !txn.preds.is_empty()) else {
            // Nothing mutated: nothing to commit (the snapshot was read at start_ts).
            return CommitOutcome::Committed;
        };
        let context = format!("commit of start_ts {start_ts}");
        match self.http.commit(start_ts, &txn.keys, &txn.preds).await {
            Ok(answer) if answer.txn.aborted => CommitOutcome::AbortedRetryable(DbError::new(
                ErrorClass::Retryable,
                Some("aborted".into()),
                context,
                "Dgraph reports the transaction aborted",
            )),
            Ok(answer) if answer.txn.commit_ts > start_ts => {
                facts.commit_ts = Some(answer.txn.commit_ts);
                CommitOutcome::Committed
            }
            // Success without a commit timestamp after start_ts: it committed, but when is not
            // known, which timestamp ordering cannot place.
            Ok(answer) => CommitOutcome::Failed(DbError::unexpected(
                &context,
                format!("the commit answer has commit_ts {} (start_ts {start_ts})", answer.txn.commit_ts),
            )),
            Err(e) => CommitOutcome::failed_with(db_error(&context, e)),
        }
    }

    async fn rollback(&mut self) -> Result<(), DbError> {
        let txn = self.take_txn();
        let Some(start_ts) = txn.start_ts.filter(|_| !txn.keys.is_empty()) else { return Ok(()) };
        match self.http.abort(start_ts).await {
            Ok(_) => Ok(()),
            // Aborting a transaction Dgraph already aborted answers the abort error.
            Err(e) if e.is_aborted() => Ok(()),
            Err(e) => {
                let e = db_error(&format!("abort of start_ts {start_ts}"), e);
                if e.is_connection_lost() {
                    Err(e)
                } else {
                    tracing::debug!("{e}");
                    Ok(())
                }
            }
        }
    }

    fn note_error(&self, facts: &mut DgraphTxnFacts, error: &DbError) {
        facts.error = Some(error.fact());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregates_follow_sql_on_the_rows_returned() {
        let rows = || [3i64, -1, 7].into_iter();
        assert_eq!(aggregate(AggregateFn::Min, rows()).unwrap(), Some(-1));
        assert_eq!(aggregate(AggregateFn::Max, rows()).unwrap(), Some(7));
        assert_eq!(aggregate(AggregateFn::Sum, rows()).unwrap(), Some(9));
        assert_eq!(aggregate(AggregateFn::Count, rows()).unwrap(), Some(3));
        assert_eq!(aggregate(AggregateFn::Count, std::iter::empty()).unwrap(), Some(0));
        assert_eq!(aggregate(AggregateFn::Sum, std::iter::empty()).unwrap(), None);
        assert_eq!(aggregate(AggregateFn::Max, std::iter::empty()).unwrap(), None);
        assert!(aggregate(AggregateFn::Sum, [i64::MAX, 1].into_iter()).is_err());
    }
}
