//! The threads that run a request's CPU work: decompressing the body, parsing the history,
//! compiling and evaluating its predicates, recovery and checking.
//!
//! Nothing a request contains may abort the process. The predicate compiler and evaluator
//! recurse once per level of an expression and allow up to 10,000 levels (deeper ones are
//! refused by name), which needs far more than the 2 MiB stacks tokio gives its workers and
//! its blocking pool: the `isocert` binary runs its commands on a 512 MiB stack for the same
//! reason (cli/src/main.rs). So this work runs here, on a few threads with that stack
//! (reserved, not committed: it costs only the pages a deep predicate touches), never on the
//! async workers, which keep answering other requests (and `/healthz`) meanwhile.
//!
//! Hand-written (a channel and a few threads) rather than tokio's `spawn_blocking`, whose
//! threads share the runtime's stack size and grow up to 512 threads: a fixed number of
//! threads also bounds how many requests decode and recover at once, and so the memory they
//! take together. A panic in a job is caught and reported as an error; the thread lives on.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// The stack of each thread: the same as the `isocert` binary's main thread, on which the
/// predicate compiler's deepest accepted input (10,000 levels) is tested.
pub const STACK_BYTES: usize = 512 << 20;

type Job = Box<dyn FnOnce() + Send>;

/// Why a job gave no result.
#[derive(Debug, thiserror::Error)]
pub enum CpuError {
    /// The job panicked (a bug); the message is the panic's.
    #[error("the request's processing failed: {0}")]
    Panicked(String),
    /// The pool is shut down.
    #[error("the server is stopping")]
    Stopped,
}

/// A fixed set of big-stack threads fed by one queue.
#[derive(Debug, Clone)]
pub struct CpuPool {
    queue: mpsc::Sender<Job>,
    threads: usize,
}

impl CpuPool {
    /// Starts `threads` threads (at least one), named `isocert-cpu-N`.
    ///
    /// # Errors
    /// When a thread cannot be started.
    pub fn new(threads: usize) -> std::io::Result<CpuPool> {
        let threads = threads.max(1);
        let (queue, jobs) = mpsc::channel::<Job>();
        let jobs = Arc::new(Mutex::new(jobs));
        for n in 0..threads {
            let jobs = Arc::clone(&jobs);
            std::thread::Builder::new().name(format!("isocert-cpu-{n}")).stack_size(STACK_BYTES).spawn(
                move || loop {
                    // The lock is held only while waiting for the next job.
                    let job = match jobs.lock() {
                        Ok(jobs) => jobs.recv(),
                        Err(_) => return,
                    };
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                },
            )?;
        }
        Ok(CpuPool { queue, threads })
    }

    /// A pool with one thread per core the process may use.
    ///
    /// # Errors
    /// When a thread cannot be started.
    pub fn per_core() -> std::io::Result<CpuPool> {
        CpuPool::new(std::thread::available_parallelism().map_or(2, |n| n.get()))
    }

    /// How many threads run jobs.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `job` on a pool thread and waits for its result without blocking the caller's
    /// async worker.
    ///
    /// # Errors
    /// [`CpuError::Panicked`] when the job panicked, [`CpuError::Stopped`] when the pool's
    /// threads are gone.
    pub async fn run<T, F>(&self, job: F) -> Result<T, CpuError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let (answer, result) = oneshot::channel();
        let wrapped: Job = Box::new(move || {
            let outcome = catch_unwind(AssertUnwindSafe(job)).map_err(|panic| {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into());
                CpuError::Panicked(message)
            });
            // The requester may have gone (its client hung up): nothing to tell then.
            let _ = answer.send(outcome);
        });
        self.queue.send(wrapped).map_err(|_| CpuError::Stopped)?;
        result.await.map_err(|_| CpuError::Stopped)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recurses `depth` times with a frame of about 1 KiB (about 100 MiB at 100,000, which a
    /// 2 MiB stack cannot hold); returns `depth`.
    fn deep(depth: usize) -> usize {
        let frame = std::hint::black_box([1u8; 1024]);
        if depth == 0 {
            return 0;
        }
        deep(depth - 1) + usize::from(frame[depth % 1024])
    }

    #[tokio::test]
    async fn deep_recursion_and_panics_stay_on_the_pool() {
        let pool = CpuPool::new(2).unwrap();
        assert_eq!(pool.run(|| deep(100_000)).await.unwrap(), 100_000);
        let e = pool.run(|| -> usize { panic!("boom") }).await.unwrap_err();
        assert!(e.to_string().contains("boom"), "{e}");
        // The threads survive a panic.
        for _ in 0..4 {
            assert_eq!(pool.run(|| 7).await.unwrap(), 7);
        }
    }
}
